package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// StateMachine is what the cluster replicates. In a Levee node it is a Mux,
// and each machine registered in the Mux (the breaker table) is a
// StateMachine too.
//
// Apply must be deterministic: it may only depend on data, appendedAt (the
// leader's clock when the entry was appended, identical on every node) and
// the current state. Its result bytes go back to the proposer; an error is
// returned to the proposer too (wrapped in ErrApply) and logged, and every
// node sees the same error for the same entry. Snapshot must capture a
// consistent copy under the state machine's own lock; Restore replaces all
// state with the snapshot. A machine registered in a Mux must also accept
// Restore(nil), meaning "reset to the empty state" (see Mux.Register).
type StateMachine interface {
	Apply(data []byte, appendedAt time.Time) ([]byte, error)
	Snapshot() ([]byte, error)
	Restore(data []byte) error
}

// Stamper is a StateMachine whose entries the leader checks and rewrites
// before appending a proposal a follower forwarded (Node.ApplyFromPeer).
// from is the sending node as the authenticated peer call names it, so
// the machine can refuse an entry that speaks for another node. An error
// refuses the proposal: nothing is appended, and ApplyFromPeer returns the
// error wrapped in ErrRefused.
type Stamper interface {
	Stamp(from string, data []byte) ([]byte, error)
}

// PeerStatus is the membership view of a peer, as the gossip layer sees it.
type PeerStatus int

// Peer statuses. The zero value is PeerAlive so a literal Peer{ID, RaftAddr}
// means a live member.
const (
	PeerAlive   PeerStatus = iota // gossip reaches it
	PeerSuspect                   // gossip suspects it; no action is taken
	PeerLeft                      // it left gracefully; the leader removes it
	PeerDead                      // gossip declared it dead; removed after Config.DeadAfter
)

// String returns the lower-case status name.
func (s PeerStatus) String() string {
	switch s {
	case PeerAlive:
		return "alive"
	case PeerSuspect:
		return "suspect"
	case PeerLeft:
		return "left"
	case PeerDead:
		return "dead"
	}
	return fmt.Sprintf("PeerStatus(%d)", int(s))
}

// Peer is one member of the cluster as passed to Reconcile.
type Peer struct {
	// ID is the node name; it is the Raft server ID.
	ID string
	// RaftAddr is the peer's Raft address (host:port). Peers without one are
	// ignored.
	RaftAddr string
	// Status is the peer's membership status.
	Status PeerStatus
	// Since is when the peer entered Status; DeadAfter is measured from it.
	Since time.Time
	// Bootstrapped reports that the peer already holds Raft state (the glue
	// publishes Node.HasState in gossip metadata). Any alive peer with it set
	// disables bootstrapping on nodes without state, as consul does for
	// bootstrap_expect, so a fresh node joining a formed cluster never starts
	// a second one. False when unknown.
	Bootstrapped bool
}

// Timings are the Raft timeouts.
type Timings struct {
	// HeartbeatTimeout is how long a follower waits without leader contact
	// before starting an election. Raft default 1s.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes. Raft default 1s.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without reaching a
	// quorum. Raft default 500ms.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout bounds how long the leader waits before sending an
	// AppendEntries with no new entries. Raft default 50ms.
	CommitTimeout time.Duration
}

// DefaultTimings returns hashicorp/raft's default timings, suited to a LAN.
func DefaultTimings() Timings {
	d := raft.DefaultConfig()
	return Timings{
		HeartbeatTimeout:   d.HeartbeatTimeout,
		ElectionTimeout:    d.ElectionTimeout,
		LeaderLeaseTimeout: d.LeaderLeaseTimeout,
		CommitTimeout:      d.CommitTimeout,
	}
}

// FastTimings returns the timings hashicorp/raft uses in its own tests
// (testing.go inmemConfig): 50ms heartbeat, election and lease, 5ms commit.
func FastTimings() Timings {
	return Timings{
		HeartbeatTimeout:   50 * time.Millisecond,
		ElectionTimeout:    50 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	}
}

// ForwardFunc carries a follower's proposal to the leader and returns the
// leader's ApplyLocal result.
type ForwardFunc func(ctx context.Context, leaderID, leaderAddr string, data []byte) ([]byte, error)

// ForwardRemoveFunc asks the leader to remove server id from the
// configuration (the leader runs RemoveLocal) and returns its error.
type ForwardRemoveFunc func(ctx context.Context, leaderID, leaderAddr, id string) error

// Config configures a Node.
type Config struct {
	// NodeID is this node's name and Raft server ID. Required.
	NodeID string
	// BindAddr is the host:port the TCP transport listens on; port 0 picks a
	// free port (tests). Required unless Transport is set.
	BindAddr string
	// AdvertiseAddr is the host:port other nodes dial. Default: the bound
	// address (which must then not be an unspecified IP such as 0.0.0.0).
	AdvertiseAddr string
	// DataDir holds raft.db (bolt log + stable store) and snapshots/.
	// Required unless InMemory.
	DataDir string
	// InMemory uses raft.InmemStore and in-memory snapshots (tests). Default
	// false.
	InMemory bool
	// Transport, when set, replaces the TCP transport (tests inject
	// raft.InmemTransport to partition nodes). The caller owns it and closes
	// it after Close. Default nil: TCP on BindAddr, owned by the Node.
	Transport raft.Transport
	// Listen, when set, is called at Start for the listener Raft accepts
	// on instead of binding BindAddr: one handing over connections already
	// authenticated by mutual TLS (the node's internal port, which carries
	// peer messages too; see package connmux). Its Addr is advertised. It
	// needs TLS, which Raft dials its peers with. Closing the transport
	// closes the listener. Default nil.
	Listen func() (net.Listener, error)
	// BootstrapExpect is how many alive members must see each other before
	// the cluster bootstraps. Default 1.
	BootstrapExpect int
	// MinVoters is the voter count below which dead peers are never removed
	// (autopilot's min_quorum). Graceful leaves are still honoured. Default
	// 0, meaning BootstrapExpect.
	MinVoters int
	// DeadAfter is how long a peer must be PeerDead or PeerLeft before the
	// leader removes it from the configuration. Default 5m.
	DeadAfter time.Duration
	// StabilizationTime is how long a node must have been leader before it
	// removes any gone peer (Consul autopilot's server_stabilization_time),
	// so a leader elected while the cluster restarts never reaps peers that
	// are merely slow to come back. Default 10s.
	StabilizationTime time.Duration
	// ReconcileInterval is how often the last peer list given to Reconcile is
	// re-evaluated without a new call (so DeadAfter expiries and new
	// leadership are acted on). Default 10s.
	ReconcileInterval time.Duration
	// ConfigChangeTimeout bounds each AddVoter/RemoveServer/Bootstrap the
	// reconciler runs in the background. Default 10s.
	ConfigChangeTimeout time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one. Default 4096: Levee's replicated state (breaker
	// table, queue, budget) is small next to a database's, so a snapshot
	// costs little, and the log on disk (and its mmap in the node's RSS)
	// stops growing within minutes (rqlite and Consul, whose state is the
	// user's data, keep 8192 and 16384).
	SnapshotThreshold uint64
	// SnapshotInterval is how often Raft checks SnapshotThreshold. Default
	// 30s.
	SnapshotInterval time.Duration
	// TrailingLogs is how many log entries are kept after a snapshot so slow
	// followers catch up without InstallSnapshot. Default 2048 (Raft's is
	// 10240): a follower further behind gets the snapshot, which is small.
	// With SnapshotThreshold the log holds at most 6,144 entries: at a
	// soak's ~10 entries a second, its size is flat after ~10 minutes.
	TrailingLogs uint64
	// SnapshotRetain is how many file snapshots are kept. Default 2.
	SnapshotRetain int
	// Timings are the Raft timeouts. Default DefaultTimings().
	Timings Timings
	// ContactLimit is how long a follower may go without hearing from its
	// leader before Healthy reports it cut off from the quorum. Default 3s:
	// three default heartbeats.
	ContactLimit time.Duration
	// Adopt, when set, is asked at Start with the voters of the state found
	// on disk (nil without state); when it answers true, that state
	// becomes this node's alone: its configuration is rewritten to this
	// node as the only voter at its transport's address, every committed
	// entry kept (raft.RecoverCluster, as Recover does), before Raft
	// starts. Default nil: the state is taken as it is. A single node's
	// own log (control.Solo) adopts its state from before a rename.
	Adopt func(stored []Peer) bool
	// OnCommit, when set, gets how long each successful proposal took:
	// Propose's whole round trip on the proposer, and on the leader its
	// share of a forwarded one (append, replicate, apply). Default nil.
	OnCommit func(time.Duration)
	// OnRefused, when set, gets each forwarded proposal the StateMachine's
	// Stamp refused, with its sender; err wraps ErrRefused and the
	// Stamper's error. It runs on the caller's goroutine once per refusal,
	// so a flood of forged proposals calls it as often: keep it cheap and
	// rate-limit what it logs. Default nil.
	OnRefused func(from string, err error)
	// TLS, when set, makes the TCP transport mutual TLS: only peers with
	// a trusted certificate can send Raft RPCs. Default nil: plain TCP
	// (tests, and injected transports, which ignore it).
	TLS *TLS
	// Forward sends a follower's proposal to the leader. Default nil:
	// Propose on a follower returns ErrNotLeader.
	Forward ForwardFunc
	// ForwardRemove sends a follower's RemoveServer to the leader. Default
	// nil: RemoveServer on a follower returns ErrNotLeader.
	ForwardRemove ForwardRemoveFunc
	// OnLeaderChange is called (from a goroutine the Node owns, never
	// concurrently) when this node gains or loses leadership or learns of a
	// new leader; leaderID is "" when no leader is known. Default nil.
	OnLeaderChange func(isLeader bool, leaderID string)
	// Logger receives the node's and raft's logs. Default: slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in; NodeID,
// BindAddr and DataDir are left for the caller.
func DefaultConfig() Config {
	return Config{
		BootstrapExpect:     1,
		DeadAfter:           5 * time.Minute,
		StabilizationTime:   10 * time.Second,
		ReconcileInterval:   10 * time.Second,
		ConfigChangeTimeout: 10 * time.Second,
		SnapshotThreshold:   4096,
		SnapshotInterval:    30 * time.Second,
		TrailingLogs:        2048,
		SnapshotRetain:      2,
		Timings:             DefaultTimings(),
		ContactLimit:        3 * time.Second,
	}
}

// withDefaults fills zero fields from DefaultConfig, so a Config literal
// that sets only what a test cares about works.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setIfZero(&c.BootstrapExpect, d.BootstrapExpect)
	setIfZero(&c.DeadAfter, d.DeadAfter)
	setIfZero(&c.StabilizationTime, d.StabilizationTime)
	setIfZero(&c.ReconcileInterval, d.ReconcileInterval)
	setIfZero(&c.ConfigChangeTimeout, d.ConfigChangeTimeout)
	setIfZero(&c.SnapshotThreshold, d.SnapshotThreshold)
	setIfZero(&c.SnapshotInterval, d.SnapshotInterval)
	setIfZero(&c.TrailingLogs, d.TrailingLogs)
	setIfZero(&c.SnapshotRetain, d.SnapshotRetain)
	setIfZero(&c.ContactLimit, d.ContactLimit)
	if c.Timings == (Timings{}) {
		c.Timings = d.Timings
	}
	if c.MinVoters == 0 {
		c.MinVoters = c.BootstrapExpect
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func setIfZero[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// Validate reports the first invalid field, wrapped in ErrInvalidConfig.
// Zero values that have a default are valid.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.validateAddrs(); err != nil {
		return err
	}
	switch {
	case c.NodeID == "":
		return invalid("NodeID is required")
	case !c.InMemory && c.DataDir == "":
		return invalid("DataDir is required unless InMemory")
	case c.BootstrapExpect < 1:
		return invalid("BootstrapExpect must be >= 1, got %d", c.BootstrapExpect)
	case c.MinVoters < 1:
		return invalid("MinVoters must be >= 1, got %d", c.MinVoters)
	case c.DeadAfter < 0, c.StabilizationTime < 0, c.ReconcileInterval < 0, c.ConfigChangeTimeout < 0, c.SnapshotInterval < 0, c.ContactLimit < 0:
		return invalid("durations must not be negative")
	case c.SnapshotRetain < 1:
		return invalid("SnapshotRetain must be >= 1, got %d", c.SnapshotRetain)
	}
	return c.validateTimings()
}

func (c Config) validateAddrs() error {
	switch {
	case c.Transport != nil:
		return nil
	case c.Listen != nil && c.TLS == nil:
		return invalid("Listen needs TLS: Raft dials its peers over mutual TLS")
	case c.Listen != nil:
		return nil
	}
	host, _, err := net.SplitHostPort(c.BindAddr)
	if err != nil {
		return invalid("BindAddr %q: %v", c.BindAddr, err)
	}
	if c.AdvertiseAddr == "" {
		// Peers must be able to dial the bound address itself.
		if ip := net.ParseIP(host); host == "" || ip == nil || ip.IsUnspecified() {
			return invalid("BindAddr %q is not dialable by peers: set AdvertiseAddr", c.BindAddr)
		}
		return nil
	}
	if _, err := net.ResolveTCPAddr("tcp", c.AdvertiseAddr); err != nil {
		return invalid("AdvertiseAddr %q: %v", c.AdvertiseAddr, err)
	}
	return nil
}

// validateTimings lets raft check the combination (e.g. lease <= heartbeat)
// so the rules live in one place.
func (c Config) validateTimings() error {
	rc := c.raftConfig()
	if err := raft.ValidateConfig(rc); err != nil {
		return invalid("raft: %v", err)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// raftConfig translates c into a raft.Config. Logger is set by the Node.
func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.Timings.HeartbeatTimeout
	rc.ElectionTimeout = c.Timings.ElectionTimeout
	rc.LeaderLeaseTimeout = c.Timings.LeaderLeaseTimeout
	rc.CommitTimeout = c.Timings.CommitTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	return rc
}

// Sentinel errors. Errors returned by the Node wrap one of them with %w.
var (
	// ErrNotLeader: the operation needs the leader and this node is not it
	// (or lost leadership before the entry committed).
	ErrNotLeader = errors.New("consensus: not the leader")
	// ErrNoLeader: no leader is known within the caller's patience.
	ErrNoLeader = errors.New("consensus: no leader")
	// ErrClosed: the node is closed (or was never started).
	ErrClosed = errors.New("consensus: node closed")
	// ErrTimeout: the context expired or raft could not enqueue in time.
	ErrTimeout = errors.New("consensus: timeout")
	// ErrApply: the StateMachine rejected the entry; the StateMachine's own
	// error is wrapped alongside it.
	ErrApply = errors.New("consensus: state machine rejected entry")
	// ErrRefused: the leader's StateMachine (a Stamper) refused a
	// forwarded proposal before it was appended; its error is wrapped
	// alongside. Retrying the same proposal is refused again.
	ErrRefused = errors.New("consensus: forwarded proposal refused")
	// ErrInvalidConfig: Config.Validate failed.
	ErrInvalidConfig = errors.New("consensus: invalid config")
	// ErrLastVoter: the removal would leave the configuration without a
	// voter.
	ErrLastVoter = errors.New("consensus: refusing to remove the last voter")
	// ErrRecover: Recover could not rewrite the configuration.
	ErrRecover = errors.New("consensus: recover")
)
