package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/levee/levee/peer"
	"github.com/levee/levee/store"
)

// Ring is the consistent-hash ring as replication reads it. *ring.Ring
// implements it.
type Ring interface {
	// Owner returns the node owning key; false on an empty ring.
	Owner(key string) (string, bool)
	// Replicas returns up to n distinct nodes for key, owner first.
	Replicas(key string, n int) []string
}

// Member is another node as replication addresses it.
type Member struct {
	Name string
	// Addr is its advertised API (HTTP) address; "" when unknown.
	Addr string
}

// Members tells replication where the other nodes are.
type Members interface {
	// Member returns the last known address of name, dead members included
	// (the ring decides who should hold a key; this only addresses them).
	Member(name string) (Member, bool)
	// Live returns every member gossip reports alive, this node included.
	Live() []Member
}

// Transport carries replication's calls to other nodes. *peer.Client
// implements it; every error wraps peer.ErrUnreachable, except a
// *peer.RemoteError from Forward, which is the owner's own answer.
type Transport interface {
	Forward(ctx context.Context, addr string, req *peer.ForwardRequest) (*peer.ForwardResponse, error)
	Replicate(ctx context.Context, addr string, e *peer.Entry) error
	Invalidate(ctx context.Context, addr string, m *peer.Invalidate) error
	Lookup(ctx context.Context, addr string, req *peer.LookupRequest) (*peer.Entry, bool, error)
	// Renew asks an owner how much longer each copy stays its fresh answer
	// (0: it is not); one duration per copy.
	Renew(ctx context.Context, addr string, m *peer.Renew) ([]time.Duration, error)
}

// Engine is the local cache as the server half writes and reads it.
// *proxy.Engine implements it.
type Engine interface {
	// Put stores an entry under its cache key unless a newer one is held;
	// it reports whether e was stored.
	Put(key string, e *store.Entry) bool
	// Lookup returns the entry for primary key pkey and request headers h,
	// following a Vary marker, and the key it lives under; nil if none.
	Lookup(pkey string, h http.Header) (string, *store.Entry)
	// Current reports how much longer the answer stored at stored under
	// variant key key of primary key pkey stays the fresh answer this node
	// serves; 0 when it is not.
	Current(pkey, key string, stored time.Time) time.Duration
}

// Observer counts replication's outcomes. *metrics.Metrics implements it.
type Observer interface {
	// ReplicationEvent counts n events of a direction ("sent", "received",
	// "handoff", "lookup") with an outcome ("ok", "error", "dropped", …).
	ReplicationEvent(direction, outcome string, n int)
	// NearCacheLookup counts one near-cache lookup: "hit" or "miss".
	NearCacheLookup(result string)
	// NearCacheRenewal counts n near copies a renewal round asked owners
	// about: "renewed" (the owner vouched for it), "changed" (it did not:
	// the copy is dropped) or "failed" (no answer: the copy ends at its
	// ttl).
	NearCacheRenewal(outcome string, n int)
	// ForwardOutcome counts one forward to owner: "ok", "remote-error",
	// "not-sent" (it provably never reached the owner) or "unreachable"
	// (it may have: its outcome is unknown).
	ForwardOutcome(owner, outcome string)
	// Invalidation counts n tombstones of writes "sent" to other nodes
	// ("ok", "error", "dropped", "expired") or "received" ("ok",
	// "refused").
	Invalidation(direction, outcome string, n int)
}

// Config configures a Replicator. Start from DefaultConfig: zero is a
// meaningful value for Replication and NearCacheBytes.
type Config struct {
	// Self is this node's name. Required.
	Self string
	// Replication is how many nodes besides the owner hold a copy of each
	// entry (cluster.replication). Default 1; 0: no replication pushes.
	Replication int
	// NearCacheBytes caps the near cache, which keeps answers forwarded
	// from owners (cluster.near_cache.max_bytes). Default 16 MiB; 0
	// disables it.
	NearCacheBytes int64
	// NearCacheTTL is the longest a near-cached answer is reused after
	// its owner sent it or last vouched for it (renewal rounds every ttl/8),
	// never past its freshness there (cluster.near_cache.ttl). Default 1s;
	// at most MaxNearCacheTTL.
	NearCacheTTL time.Duration
	// HandoffInterval is how often entries a member still lacks are pushed
	// again between membership changes. Default 3s.
	HandoffInterval time.Duration
	// HandoffMaxEntries caps the hand-off set in entries. Default 10 000.
	HandoffMaxEntries int
	// HandoffMaxBytes caps the hand-off set in bytes (it may hold bodies
	// the cache evicted already). Default 64 MiB.
	HandoffMaxBytes int64
	// LookupTimeout bounds one recovery lookup: a client is waiting on a
	// request whose upstream fetch failed. Default 500ms.
	LookupTimeout time.Duration
	// PushTimeout bounds one replication or hand-off push. Default 2s.
	PushTimeout time.Duration
	// QueueSize bounds the replication backlog; a full queue drops the
	// push (a replica is for failover, never required). Default 4096.
	QueueSize int
	// Workers is the number of goroutines sending pushes. Default 2.
	Workers int
	// PendingInvalidations bounds the writes' tombstones this node keeps
	// to send to members that did not take them yet or come back later;
	// past it the oldest is dropped (levee_invalidations_total{outcome=
	// "dropped"}). Default 10 000.
	PendingInvalidations int
	// Tombstones is the local cache's record of writes: invalidations
	// from other nodes are laid in it, and copies it shadows are neither
	// handed off, replicated nor recovered. Default nil: invalidations
	// reach only the near cache and the hand-off set (tests).
	Tombstones Tombstones

	// Ring places keys. Required.
	Ring Ring
	// Members addresses nodes. Required.
	Members Members
	// Transport carries the calls; the caller closes it. Required.
	Transport Transport
	// Observer counts outcomes. Default nil: nothing is counted.
	Observer Observer
	// Logger is prefixed by the caller. Default nil: discard.
	Logger *slog.Logger
	// Now is the clock for freshness, the near cache and hand-off expiry.
	// Default nil: time.Now.
	Now func() time.Time
}

// DefaultConfig returns the defaults documented on Config's fields.
func DefaultConfig() Config {
	return Config{
		Replication:       1,
		NearCacheBytes:    16 << 20,
		NearCacheTTL:      time.Second,
		HandoffInterval:   3 * time.Second,
		HandoffMaxEntries: 10_000,
		HandoffMaxBytes:   64 << 20,
		LookupTimeout:     500 * time.Millisecond,
		PushTimeout:       2 * time.Second,
		QueueSize:         4096,
		Workers:           2,

		PendingInvalidations: 10_000,
	}
}

// MaxNearCacheTTL bounds Config.NearCacheTTL (cluster.near_cache.ttl,
// which config validates with it): a near copy is a shortcut past the
// owner, never a second cache.
const MaxNearCacheTTL = time.Minute

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Self == "":
		return errors.New("replica: Self is required")
	case c.Ring == nil || c.Members == nil || c.Transport == nil:
		return errors.New("replica: Ring, Members and Transport are required")
	case c.Replication < 0 || c.NearCacheBytes < 0:
		return fmt.Errorf("replica: Replication %d and NearCacheBytes %d must be >= 0", c.Replication, c.NearCacheBytes)
	case c.NearCacheBytes > 0 && (c.NearCacheTTL <= 0 || c.NearCacheTTL > MaxNearCacheTTL):
		return fmt.Errorf("replica: NearCacheTTL %s must be in (0, %v]", c.NearCacheTTL, MaxNearCacheTTL)
	case c.HandoffInterval <= 0 || c.LookupTimeout <= 0 || c.PushTimeout <= 0:
		return errors.New("replica: HandoffInterval, LookupTimeout and PushTimeout must be > 0")
	case c.HandoffMaxEntries <= 0 || c.HandoffMaxBytes <= 0 || c.QueueSize <= 0 || c.Workers <= 0:
		return errors.New("replica: HandoffMaxEntries, HandoffMaxBytes, QueueSize and Workers must be > 0")
	case c.PendingInvalidations <= 0:
		return errors.New("replica: PendingInvalidations must be > 0")
	}
	return nil
}

// nopObserver counts nothing: Config.Observer's nil default.
type nopObserver struct{}

func (nopObserver) ReplicationEvent(string, string, int) {}
func (nopObserver) NearCacheLookup(string)               {}
func (nopObserver) NearCacheRenewal(string, int)         {}
func (nopObserver) ForwardOutcome(string, string)        {}
func (nopObserver) Invalidation(string, string, int)     {}
