package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/clustertls"
	"github.com/levee/levee/config"
	"github.com/levee/levee/connmux"
	"github.com/levee/levee/pausewatch"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/replica"
	"github.com/levee/levee/ring"
)

// Deps are what a Mesh takes from the rest of the node besides its
// configuration.
type Deps struct {
	// Identity is this node's side of mutual TLS on the internal port,
	// which peer messages are sent over. Required.
	Identity *clustertls.Identity
	// GossipTimings are how fast the mesh detects failures and hands
	// entries off. Default (zero): the LAN defaults named on each field.
	GossipTimings
	// WrapTransport, when set, wraps the peer client's transport (tests
	// cut links with it). Default nil.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Observer counts replication; Tombstones are the cache's, so a
	// replicated or handed-off copy of a removed entry is refused.
	Observer   replica.Observer
	Tombstones replica.Tombstones
	Now        func() time.Time
	Logger     *slog.Logger
}

// GossipTimings are how fast the mesh detects failures and spreads
// state. They are not in the config file: the defaults suit a LAN, and
// tests shorten them (node.Timings carries them). A zero field takes the
// default named on it.
type GossipTimings struct {
	// Gossip is memberlist's failure detection and spread. Default
	// cluster.LANTimings(): a crashed peer is declared dead in about 5 s.
	Gossip cluster.Timings
	// Handoff is how often entries a member still lacks are pushed again
	// between membership changes (replica.Config.HandoffInterval). Default
	// 3s.
	Handoff time.Duration
}

// Mesh is membership, the ring and replication, wired together. Its
// fields are the pieces, for the parts that need one of them (the Raft
// bridge subscribes to Membership and forwards over Client; the proxy
// stores through Replicator).
type Mesh struct {
	Membership *cluster.Membership
	Ring       *ring.Ring
	Client     *peer.Client // shared by replication and Raft forwarding
	Replicator *replica.Replicator
	// Pause tells this process it was stopped long enough for its peers
	// to declare it dead (api's stand-in rule, proxy's confirm).
	Pause *pausewatch.Watch

	node         config.Node
	log          *slog.Logger
	leaveTimeout time.Duration
	now          func() time.Time
	started      atomic.Int64  // UnixNano of Start on now; 0 before
	joined       chan struct{} // closed once Ready first said yes (WaitJoined)
	joinedOnce   sync.Once
	begun        chan struct{} // closed by Start, once gossip runs
	begunOnce    sync.Once
}

// JoinGrace bounds how long a node with gossip seeds (node.join) stays
// unready while it has found no peer: past it, a node whose peers are all
// down (the first of a new cluster, or the last one standing) serves
// alone.
const JoinGrace = 10 * time.Second

// New builds the mesh from cfg; it does no I/O until Start.
func New(cfg *config.Config, d Deps) (*Mesh, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	mc := membershipConfig(cfg, d)
	ml, err := cluster.NewMembership(mc)
	if err != nil {
		return nil, err
	}
	rg, err := ring.New(ring.Config{Partitions: cfg.Cluster.Partitions, ReplicationFactor: ring.DefaultConfig().ReplicationFactor, Load: cfg.Cluster.LoadFactor})
	if err != nil {
		return nil, err
	}
	tlsc := d.Identity.ClientConfig()
	if d.Now == nil {
		d.Now = time.Now
	}
	m := &Mesh{Membership: ml, Ring: rg, node: cfg.Node, log: d.Logger, leaveTimeout: mc.Timings.LeaveTimeout, now: d.Now,
		joined: make(chan struct{}), begun: make(chan struct{})}
	m.Client = peer.NewClient(peer.ClientConfig{
		Self: cfg.Node.Name, Timeout: cfg.Cluster.ForwardTimeout.D(), Wrap: d.WrapTransport, HTTP2: true,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return connmux.Dial(ctx, addr, connmux.KindPeer, tlsc)
		},
		DialStream: func(ctx context.Context, addr string) (net.Conn, error) {
			return connmux.Dial(ctx, addr, connmux.KindStream, tlsc)
		},
	})
	rc := replica.DefaultConfig()
	rc.Self, rc.Replication = cfg.Node.Name, cfg.Cluster.Replication
	rc.NearCacheBytes, rc.NearCacheTTL = cfg.Cluster.NearCache.MaxBytes.Int64(), cfg.Cluster.NearCache.TTL.D()
	if d.Handoff > 0 {
		rc.HandoffInterval = d.Handoff
	}
	rc.Ring, rc.Members, rc.Transport = rg, memberAddrs{ml}, m.Client
	rc.Observer, rc.Tombstones, rc.Logger, rc.Now = d.Observer, d.Tombstones, d.Logger.With("subsystem", "replica"), d.Now
	if m.Replicator, err = replica.New(rc); err != nil {
		return nil, err
	}
	if m.Pause, err = pausewatch.New(pauseConfig(mc.Timings, rc.HandoffInterval, d.Logger)); err != nil {
		return nil, err
	}
	ml.Subscribe(m.onEvent)
	return m, nil
}

// pauseConfig watches for a stop as long as the shortest in which gossip
// may declare this node dead (SuspicionMult × ProbeInterval: LAN 4 s), at
// least minPauseGap, and holds for that plus a hand-off round (LAN 3 s):
// by then the peers have heard the node is back (a refutation spreads in
// a few gossip rounds) and handed its keys' newer copies back.
func pauseConfig(t cluster.Timings, handoff time.Duration, log *slog.Logger) pausewatch.Config {
	gap := max(time.Duration(t.SuspicionMult)*t.ProbeInterval, minPauseGap)
	return pausewatch.Config{Gap: gap, Hold: gap + handoff, Logger: log.With("subsystem", "pausewatch")}
}

// minPauseGap is the shortest stop a node takes for one: test timings
// declare a peer dead in 200 ms, and a test process under the race
// detector on a busy machine can stall a goroutine for longer, which
// would hold its node and move its keys mid-test for nothing a LAN's
// timings (4 s) would ever see.
const minPauseGap = 2 * time.Second

// membershipConfig is cluster.MembershipConfig from the node's
// configuration; the API, Raft and peer addresses are advertised at
// Start, once bound.
func membershipConfig(cfg *config.Config, d Deps) cluster.MembershipConfig {
	mc := cluster.DefaultMembershipConfig()
	mc.Name, mc.BindAddr, mc.Join, mc.Secret = cfg.Node.Name, cfg.Node.Gossip, cfg.Node.Join, cfg.Cluster.Secret
	mc.TrustedSecrets, mc.LegacyGossipKey = cfg.Cluster.TrustedSecrets, cfg.Cluster.LegacyGossipKey
	if cfg.Node.Advertise != "" {
		mc.AdvertiseAddr = cfg.Node.Advertised(cfg.Node.Gossip)
	}
	mc.RejoinInterval, mc.Logger = cfg.Cluster.RejoinInterval.D(), d.Logger.With("subsystem", "gossip")
	if d.Gossip != (cluster.Timings{}) {
		mc.Timings = d.Gossip
	}
	return mc
}

// Start joins the cluster, advertising the bound API, Raft and peer
// addresses and, when this node holds Raft state, the bootstrapped flag
// from the very first gossip; then replication's hand-off loop starts.
func (m *Mesh) Start(ctx context.Context, httpAddr, raftAddr, peerAddr string, hasRaftState bool) error {
	if err := m.Membership.Advertise(m.node.Advertised(httpAddr), raftAddr, peerAddr); err != nil {
		return err
	}
	_ = m.Membership.SetBootstrapped(hasRaftState, 0) // before Start it only sets the flag and cannot fail
	m.started.Store(m.now().UnixNano())
	if err := m.Membership.Start(ctx); err != nil {
		return fmt.Errorf("mesh: gossip on node.gossip %s: %w", m.node.Gossip, err)
	}
	m.Replicator.Start()
	m.Pause.Start()
	m.begunOnce.Do(func() { close(m.begun) })
	m.noteJoined()
	return nil
}

// WaitJoined waits until this node has joined (Ready, once), or for as
// long as readiness would (JoinGrace from Start), or until ctx ends (its
// error). api waits on it before routing a data request: until it has
// joined, a node's ring holds itself alone, and it would own every key,
// fetching keys their owners hold fresh (a soak's coalescing failure: a
// restarted node fetched a key 0.5 s before its owner did, docs/chaos.md).
// The app port opens before gossip starts (the node opens Raft's store
// first), so a request may come before Start: it waits for Start, then
// as above.
func (m *Mesh) WaitJoined(ctx context.Context) error {
	select {
	case <-m.joined:
		return nil
	default:
	}
	select {
	case <-m.begun:
	case <-m.joined:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	if m.noteJoined() {
		return nil
	}
	left := JoinGrace - m.now().Sub(time.Unix(0, m.started.Load()))
	if left <= 0 {
		return nil
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-m.joined:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// noteJoined records that the node has joined, if Ready says so, and
// reports whether it has.
func (m *Mesh) noteJoined() bool {
	if m.Ready() != nil {
		return false
	}
	m.joinedOnce.Do(func() { close(m.joined) })
	return true
}

// onEvent keeps the ring (which never sees memberlist) and replication in
// step with membership.
func (m *Mesh) onEvent(ev cluster.Event) {
	switch ev.Type {
	case cluster.EventJoin, cluster.EventUpdate:
		if ev.Member.State == cluster.Alive {
			if err := m.Ring.Add(ev.Member.Name); err != nil {
				m.log.Error("ring add", "member", ev.Member.Name, "err", err)
			}
			m.Replicator.MemberUp(ev.Member.Name)
			m.noteJoined()
		}
	case cluster.EventLeave, cluster.EventFail:
		m.Ring.Remove(ev.Member.Name)
	}
	m.log.Info("membership", "event", ev.Type.String(), "member", ev.Member.Name, "state", ev.Member.State.String())
}

// PeerEndpoints are the messages this node answers for replication on its
// internal port: pushes, lookups and near-cache renewals into store (the
// engine), and invalidations.
func (m *Mesh) PeerEndpoints(store replica.Engine, o replica.Observer) []api.PeerEndpoint {
	srv := replica.NewServer(store, o)
	return []api.PeerEndpoint{
		{Path: peer.PathReplicate, Serve: srv.ServeReplicate},
		{Path: peer.PathLookup, Serve: srv.ServeLookup},
		{Path: peer.PathInvalidate, Serve: m.Replicator.ServeInvalidate},
		{Path: peer.PathRenew, Serve: srv.ServeRenew},
	}
}

// PeerAddr is where member name takes peer messages (its internal port).
func (m *Mesh) PeerAddr(name string) (string, bool) {
	mb, ok := m.Membership.Member(name)
	return mb.PeerAddr, ok && mb.PeerAddr != ""
}

// Live is how many members are on the ring, this node included: the
// alive members, who share the cluster-wide upstream caps. The ring
// subscribed first, so a membership event has reached it by the time a
// later subscriber asks.
func (m *Mesh) Live() int { return len(m.Ring.Members()) }

// Ready: the node has joined: it sees itself on the ring and, when it has
// gossip seeds, at least one peer there too, or JoinGrace has passed since
// Start. A restarted node that answered as soon as it saw itself would own
// every key on its one-member ring and serve its cache file's copies,
// which the nodes that owned them meanwhile may have replaced (a soak's
// no-time-travel failure, docs/chaos.md); a load balancer that follows
// readiness sends it nothing until its ring holds the cluster.
func (m *Mesh) Ready() error {
	self, peers := false, 0
	for _, name := range m.Ring.Members() {
		if name == m.node.Name {
			self = true
		} else {
			peers++
		}
	}
	switch {
	case !self:
		return errors.New("not on the ring yet")
	case peers == 0 && len(m.node.Join) > 0 && m.inJoinGrace():
		return fmt.Errorf("joining: no peer of node.join found yet (ready alone after %s)", JoinGrace)
	}
	return nil
}

func (m *Mesh) inJoinGrace() bool {
	started := m.started.Load()
	return started == 0 || m.now().Sub(time.Unix(0, started)) < JoinGrace
}

// Status is each member as /-/cluster shows it.
func (m *Mesh) Status() []cluster.MemberStatus {
	return cluster.Statuses(m.Membership.Members(), m.Ring.Shares())
}

// Leave announces a graceful departure in gossip (peers stop routing to
// this node; its Raft seat is kept). Calling it twice is harmless.
func (m *Mesh) Leave() {
	if err := m.Membership.Leave(m.leaveTimeout); err != nil && !errors.Is(err, cluster.ErrMembershipNotStarted) {
		m.log.Warn("gossip leave", "err", err)
	}
}

// Close stops gossip (and event delivery), replication, and the client
// they shared.
func (m *Mesh) Close() {
	m.Pause.Close()
	m.Membership.Close()
	m.Replicator.Close()
	m.Client.Close()
}

// memberAddrs is the member table as replication addresses it.
type memberAddrs struct{ ml *cluster.Membership }

func (m memberAddrs) Member(name string) (replica.Member, bool) {
	mb, ok := m.ml.Member(name)
	return replica.Member{Name: mb.Name, Addr: mb.PeerAddr}, ok
}

func (m memberAddrs) Live() []replica.Member {
	var out []replica.Member
	for _, mb := range m.ml.Members() {
		if mb.State == cluster.Alive {
			out = append(out, replica.Member{Name: mb.Name, Addr: mb.PeerAddr})
		}
	}
	return out
}
