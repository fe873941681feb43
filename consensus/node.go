package consensus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

const (
	boltFile     = "raft.db"
	snapshotsDir = "snapshots"
	// logCacheSize is how many recent entries are served from memory instead
	// of bolt, as consul and rqlite do.
	logCacheSize = 512
	// boltOpenTimeout bounds waiting for bolt's file lock, so a second
	// process on the same DataDir fails instead of hanging.
	boltOpenTimeout = 2 * time.Second
	// transportTimeout is the TCP transport's I/O deadline per RPC.
	transportTimeout = 10 * time.Second
	// transportPool is how many idle connections are kept per peer.
	transportPool = 3
)

// Node is one member of the Raft group. Lifecycle: New (no I/O) → Start →
// Close. All methods are safe for concurrent use.
type Node struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm
	addrs *addrBook
	stats counters

	raft   atomic.Pointer[raft.Raft]   // set once by Start
	damage atomic.Pointer[DamageError] // set instead by a Start that found damaged state (damaged.go)

	mu           sync.Mutex // guards the fields below
	started      bool
	closed       bool
	peers        []Peer               // last Reconcile input
	removed      map[string]time.Time // IDs removed on request, and when (removalHolds)
	ownTrans     *raft.NetworkTransport
	stores       io.Closer // bolt; nil when InMemory
	logs         raft.LogStore
	observer     *raft.Observer
	observations chan raft.Observation

	hadState      atomic.Bool  // state found on disk at Start, or bootstrapped since
	restarted     atomic.Bool  // state found on disk at Start; true before (see Restarted)
	caughtUp      atomic.Bool  // latched by CaughtUp, see catchup.go
	leaderKnownAt atomic.Int64 // UnixNano when a leader was first known since Start (settled)
	leaderSince   atomic.Int64 // UnixNano when this node became leader; 0 when not leader
	reconcileReq  chan struct{}
	nudgeReq      chan struct{}   // see nudge.go
	goMu          sync.Mutex      // orders cancel against wg.Add in goTracked
	ctx           context.Context // cancelled by Close; owns every goroutine
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	closeOnce     sync.Once
	closeErr      error
}

// New validates cfg and returns an unstarted Node. It does no I/O.
func New(cfg Config, sm StateMachine) (*Node, error) {
	if sm == nil {
		return nil, fmt.Errorf("%w: nil StateMachine", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("node", cfg.NodeID, "subsystem", "consensus")
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg:          cfg,
		log:          log,
		addrs:        newAddrBook(),
		reconcileReq: make(chan struct{}, 1),
		nudgeReq:     make(chan struct{}, 1),
		ctx:          ctx,
		cancel:       cancel,
	}
	n.fsm = &fsm{sm: sm, log: log, rejected: &n.stats.applyErrors}
	n.restarted.Store(true) // until Start has looked: see Restarted
	return n, nil
}

// Start opens the stores and the transport and starts Raft. A node that
// finds state on disk simply starts and rejoins with it; a node without state
// waits for Reconcile to bootstrap it or for a leader to add it. State on
// disk that cannot be read is a *DamageError (ErrDamaged), which Damaged
// keeps: the node then runs without Raft (see damaged.go).
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		return ErrClosed
	case n.started:
		return errors.New("consensus: Start called twice")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("consensus: start: %w", err)
	}
	if err := n.startRaft(); err != nil {
		var de *DamageError
		if errors.As(err, &de) {
			n.damage.Store(de)
		}
		return err
	}
	n.started = true
	n.goTracked(n.watchLeader)
	n.goTracked(n.reconcileLoop)
	n.goTracked(n.nudgeLoop)
	return nil
}

// startRaft builds stores, transport and raft; on failure it releases what
// it opened. Called with n.mu held.
func (n *Node) startRaft() (err error) {
	st, err := n.openStores()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			n.closeOwned(st.closer)
		}
	}()
	trans, err := n.openTransport()
	if err != nil {
		return err
	}
	rc := n.cfg.raftConfig()
	rc.Logger = newHclog(n.cfg.Logger.With("node", n.cfg.NodeID), "raft")
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := n.adopt(rc, st, trans); err != nil {
		return err
	}
	has, r, err := newRaft(rc, n.fsm, st, trans)
	if err != nil {
		return fmt.Errorf("consensus: start raft: %w", err)
	}
	n.stores, n.logs = st.closer, st.logs
	n.hadState.Store(has)
	n.restarted.Store(has)
	n.raft.Store(r)
	n.observe(r)
	n.log.Info("raft started", "addr", trans.LocalAddr(), "existing_state", has)
	return nil
}

type storeSet struct {
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
	closer io.Closer // nil when nothing needs closing
}

func (n *Node) openStores() (storeSet, error) {
	if n.cfg.InMemory {
		mem := raft.NewInmemStore()
		return storeSet{logs: mem, stable: mem, snaps: raft.NewInmemSnapshotStore()}, nil
	}
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return storeSet{}, fmt.Errorf("consensus: data dir: %w", err)
	}
	bolt, err := openBolt(filepath.Join(n.cfg.DataDir, boltFile))
	if err != nil {
		return storeSet{}, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(n.cfg.DataDir, snapshotsDir),
		n.cfg.SnapshotRetain, newHclog(n.log, "snapshots"))
	if err != nil {
		_ = bolt.Close()
		return storeSet{}, fmt.Errorf("consensus: open snapshot store: %w", err)
	}
	logs, err := raft.NewLogCache(logCacheSize, bolt)
	if err != nil {
		_ = bolt.Close()
		return storeSet{}, fmt.Errorf("consensus: log cache: %w", err)
	}
	stable := &closingStable{store: bolt, closer: bolt}
	return storeSet{logs: logs, stable: stable, snaps: snaps, closer: stable}, nil
}

// openTransport returns the injected transport or a TCP one the Node owns.
// The TCP transport resolves peers through the address book first, so a
// peer that came back on a new address is reachable before the leader has
// rewritten its entry in the configuration.
func (n *Node) openTransport() (raft.Transport, error) {
	if n.cfg.Transport != nil {
		return n.cfg.Transport, nil
	}
	var advertise net.Addr
	if n.cfg.AdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", n.cfg.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("consensus: advertise addr: %w", err)
		}
		advertise = a
	}
	tc := &raft.NetworkTransportConfig{
		ServerAddressProvider: n.addrs,
		Logger:                newHclog(n.log, "raft-net"),
		MaxPool:               transportPool,
		Timeout:               transportTimeout,
		// 1 turns pipelined replication off. With pipelining (raft's
		// default of 2 in flight, unbuffered channels), a follower's
		// stale-term or failed answer ends the pipeline's decoder while the
		// sender can still park one more AppendEntries on it: replication
		// to that follower stops for good and Raft.Shutdown never returns
		// (we hit it stopping a 5-node cluster; grafana/pyroscope#5518 has
		// the same analysis and fix). Breaker commands are small and rare,
		// so synchronous replication costs nothing measurable.
		MaxRPCsInFlight: 1,
	}
	nt, err := n.networkTransport(advertise, tc)
	if err != nil {
		return nil, fmt.Errorf("consensus: listen %s: %w", n.cfg.BindAddr, err)
	}
	n.ownTrans = nt
	return nt, nil
}

// networkTransport is raft's TCP transport, or, with Config.TLS, the same
// transport over mutual TLS.
func (n *Node) networkTransport(advertise net.Addr, tc *raft.NetworkTransportConfig) (*raft.NetworkTransport, error) {
	if n.cfg.Listen != nil {
		ln, err := n.cfg.Listen()
		if err != nil {
			return nil, err
		}
		tc.Stream = &tlsStream{Listener: ln, advertise: ln.Addr(), cfg: *n.cfg.TLS, authenticated: true}
		return raft.NewNetworkTransportWithConfig(tc), nil
	}
	if n.cfg.TLS == nil {
		return raft.NewTCPTransportWithConfig(n.cfg.BindAddr, advertise, tc)
	}
	stream, err := listenTLS(n.cfg.BindAddr, advertise, *n.cfg.TLS)
	if err != nil {
		return nil, err
	}
	tc.Stream = stream
	return raft.NewNetworkTransportWithConfig(tc), nil
}

// Addr is the address other nodes dial for Raft (the advertised address,
// with the real port when BindAddr used port 0). Empty before Start.
func (n *Node) Addr() string {
	r := n.raft.Load()
	if r == nil {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ownTrans != nil {
		return string(n.ownTrans.LocalAddr())
	}
	return string(n.cfg.Transport.LocalAddr())
}

// ID is the node's Raft server ID (Config.NodeID).
func (n *Node) ID() string { return n.cfg.NodeID }

// Restarted reports whether the node found Raft state on disk at Start:
// its state machine may then hold a stale view until it catches up. Until
// Start has read the disk (and when it could not: a damaged store) it is
// true, since the node may hold saved state it has not read: a node that
// serves before Raft opens its stores (node.http listens first) must not
// take its empty table for the cluster's, as a fresh node may.
func (n *Node) Restarted() bool { return n.restarted.Load() }

// HasState reports whether this node holds Raft state: found on disk at
// Start, bootstrapped, or received from a leader. The glue publishes it in
// gossip metadata as Peer.Bootstrapped.
func (n *Node) HasState() bool {
	if n.hadState.Load() {
		return true
	}
	r := n.raft.Load()
	return r != nil && r.LastIndex() > 0
}

// goTracked runs fn in a goroutine owned by the Node's WaitGroup, unless the
// Node is closing (Close must not race a late wg.Add). Reports whether fn
// was started.
func (n *Node) goTracked(fn func()) bool {
	n.goMu.Lock()
	defer n.goMu.Unlock()
	if n.ctx.Err() != nil {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
	return true
}

// running returns the raft instance of a started, unclosed node. A node
// whose Start found its store damaged answers with that damage (ErrDamaged),
// not ErrClosed: it never ran Raft, so nothing it was asked reached a log,
// where a close may cut a commit short (ErrClosed: outcome unknown).
func (n *Node) running() (*raft.Raft, error) {
	r := n.raft.Load()
	if d := n.damage.Load(); r == nil && d != nil && n.ctx.Err() == nil {
		return nil, d
	}
	if r == nil || n.ctx.Err() != nil {
		return nil, ErrClosed
	}
	return r, nil
}

// Close shuts the node down in order: stop our goroutines' context, shut
// raft down (failing pending futures with ErrClosed), wait for our
// goroutines, then close the transport we own and the stores. Safe to call
// more than once and before Start.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.shutdown() })
	return n.closeErr
}

func (n *Node) shutdown() error {
	n.mu.Lock()
	n.closed = true // after any Start in progress
	n.mu.Unlock()
	// Cancelling under goMu means no goTracked can wg.Add after this point,
	// so wg.Wait below cannot race a wg.Add.
	n.goMu.Lock()
	n.cancel()
	n.goMu.Unlock()

	var errs []error
	if r := n.raft.Load(); r != nil {
		if n.observer != nil {
			r.DeregisterObserver(n.observer)
		}
		if err := r.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("consensus: raft shutdown: %w", err))
		}
	}
	n.wg.Wait()
	if n.ownTrans != nil {
		n.ownTrans.CloseStreams()
		errs = append(errs, n.ownTrans.Close())
	}
	if n.stores != nil {
		errs = append(errs, n.stores.Close())
	}
	n.log.Info("consensus node closed")
	return errors.Join(errs...)
}

// closeOwned releases what a failed Start opened.
func (n *Node) closeOwned(stores io.Closer) {
	if n.ownTrans != nil {
		_ = n.ownTrans.Close()
		n.ownTrans = nil
	}
	if stores != nil {
		_ = stores.Close()
	}
}
