package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/clustertls"
	"github.com/levee/levee/config"
	"github.com/levee/levee/connmux"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/replica"
	"github.com/levee/levee/ring"
)

// clusterPart is everything a node runs only in a cluster: membership,
// the ring fed from it, and the replica.Replicator wired to both. Each
// part subscribes to membership events itself, in order: ring, then
// replication, then whoever else start is given (the Raft bridge).
type clusterPart struct {
	self      string
	bind      string // node.gossip
	advertise string // node.advertise
	log       *slog.Logger
	timings   cluster.Timings
	ml        *cluster.Membership
	ring      *ring.Ring
	client    *peer.Client // shared by replication and Raft forwarding
	rep       *replica.Replicator
}

func newClusterPart(cfg *config.Config, opts Options, id *clustertls.Identity, o replica.Observer, tombs replica.Tombstones, log *slog.Logger) (*clusterPart, error) {
	ml, err := cluster.NewMembership(membershipConfig(cfg, opts, log))
	if err != nil {
		return nil, err
	}
	rg, err := ring.New(ring.Config{Partitions: cfg.Cluster.Partitions, ReplicationFactor: ring.DefaultConfig().ReplicationFactor, Load: cfg.Cluster.LoadFactor})
	if err != nil {
		return nil, err
	}
	tlsc := id.ClientConfig()
	c := &clusterPart{self: cfg.Node.Name, bind: cfg.Node.Gossip, advertise: cfg.Node.Advertise, log: log, timings: opts.Timings.Gossip, ml: ml, ring: rg, client: peer.NewClient(peer.ClientConfig{
		Self: cfg.Node.Name, Timeout: cfg.Cluster.ForwardTimeout.D(), Wrap: opts.WrapPeerTransport, HTTP2: true,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return connmux.Dial(ctx, addr, connmux.KindPeer, tlsc)
		},
	})}
	rc := replica.DefaultConfig()
	rc.Self, rc.Replication = cfg.Node.Name, cfg.Cluster.Replication
	rc.NearCacheBytes, rc.NearCacheTTL = cfg.Cluster.NearCache.MaxBytes.Int64(), cfg.Cluster.NearCache.TTL.D()
	rc.HandoffInterval = opts.Timings.Handoff
	rc.Ring, rc.Members, rc.Transport = rg, memberAddrs{ml}, c.client
	rc.Observer, rc.Logger, rc.Now = o, log.With("subsystem", "replica"), opts.Now
	rc.Tombstones = tombs
	if c.rep, err = replica.New(rc); err != nil {
		return nil, err
	}
	ml.Subscribe(c.onEvent)
	return c, nil
}

// membershipConfig is cluster.MembershipConfig from the node's
// configuration; the API and Raft addresses are advertised at start, once
// bound.
func membershipConfig(cfg *config.Config, opts Options, log *slog.Logger) cluster.MembershipConfig {
	mc := cluster.DefaultMembershipConfig()
	mc.Name, mc.BindAddr, mc.Join, mc.Secret = cfg.Node.Name, cfg.Node.Gossip, cfg.Node.Join, cfg.Cluster.Secret
	mc.TrustedSecrets, mc.LegacyGossipKey = cfg.Cluster.TrustedSecrets, cfg.Cluster.LegacyGossipKey
	if cfg.Node.Advertise != "" {
		_, port, _ := net.SplitHostPort(cfg.Node.Gossip)
		mc.AdvertiseAddr = net.JoinHostPort(cfg.Node.Advertise, port)
	}
	mc.RejoinInterval, mc.Logger, mc.Timings = cfg.Cluster.RejoinInterval.D(), log.With("subsystem", "gossip"), opts.Timings.Gossip
	return mc
}

// start joins the cluster, advertising the bound API, Raft and peer
// addresses and, when this node holds Raft state, the bootstrapped flag
// from the very first gossip.
func (c *clusterPart) start(ctx context.Context, httpAddr, raftAddr, peerAddr string, hasRaftState bool) error {
	if err := c.ml.Advertise(advertised(c.advertise, httpAddr), raftAddr, peerAddr); err != nil {
		return err
	}
	_ = c.ml.SetBootstrapped(hasRaftState, 0) // before Start it only sets the flag and cannot fail
	if err := c.ml.Start(ctx); err != nil {
		return fmt.Errorf("node: gossip on node.gossip %s: %w", c.bind, err)
	}
	c.rep.Start()
	return nil
}

// onEvent keeps the ring (which never sees memberlist) and replication in
// step with membership.
func (c *clusterPart) onEvent(ev cluster.Event) {
	switch ev.Type {
	case cluster.EventJoin, cluster.EventUpdate:
		if ev.Member.State == cluster.Alive {
			if err := c.ring.Add(ev.Member.Name); err != nil {
				c.log.Error("ring add", "member", ev.Member.Name, "err", err)
			}
			c.rep.MemberUp(ev.Member.Name)
		}
	case cluster.EventLeave, cluster.EventFail:
		c.ring.Remove(ev.Member.Name)
	}
	c.log.Info("membership", "event", ev.Type.String(), "member", ev.Member.Name, "state", ev.Member.State.String())
}

// advertised replaces the host of a bound address with the advertise host.
func advertised(host, bound string) string {
	if host == "" {
		return bound
	}
	_, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	return net.JoinHostPort(host, port)
}

// peerAddr is where a member takes peer messages (its internal port).
func (c *clusterPart) peerAddr(name string) (string, bool) {
	m, ok := c.ml.Member(name)
	return m.PeerAddr, ok && m.PeerAddr != ""
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

// live is how many members are on the ring, this node included: the
// alive members, who share the cluster-wide upstream caps. The ring
// subscribed first, so a membership event has reached it by the time a
// later subscriber asks.
func (c *clusterPart) live() int { return len(c.ring.Members()) }

// ready: the node has joined (it sees itself on the ring).
func (c *clusterPart) ready() error {
	for _, m := range c.ring.Members() {
		if m == c.self {
			return nil
		}
	}
	return errors.New("not on the ring yet")
}

func (c *clusterPart) status() []cluster.MemberStatus {
	return cluster.Statuses(c.ml.Members(), c.ring.Shares())
}

// leave announces a graceful departure in gossip (peers stop routing to
// this node; its Raft seat is kept). Calling it twice is harmless.
func (c *clusterPart) leave() {
	if err := c.ml.Leave(c.timings.LeaveTimeout); err != nil && !errors.Is(err, cluster.ErrMembershipNotStarted) {
		c.log.Warn("gossip leave", "err", err)
	}
}

// close stops gossip (and event delivery), replication, and the client
// they shared.
func (c *clusterPart) close() {
	c.ml.Close()
	c.rep.Close()
	c.client.Close()
}
