package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"

	"sync"
	"time"

	"github.com/levee/levee/cluster"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/replica"
	"github.com/levee/levee/ring"
)

// clusterPart is everything a node runs only in a cluster: membership,
// the ring fed from it, and the replica.Replicator it wires to both. Its
// watch loop is the one consumer of membership events: member table →
// ring → replication → Raft voter reconciliation.
type clusterPart struct {
	n       *Node
	ml      *cluster.Membership
	leaveIn time.Duration // the gossip timings' LeaveTimeout
	ring    *ring.Ring
	client  *peer.Client // shared by replication and Raft forwarding
	rep     *replica.Replicator

	mu      sync.RWMutex
	members map[string]cluster.Member // last known, including dead ones

	wg sync.WaitGroup
}

func newClusterPart(n *Node) (*clusterPart, error) {
	cfg := n.cfg
	rg, err := ring.New(ring.Config{Partitions: cfg.Cluster.Partitions, ReplicationFactor: ring.DefaultConfig().ReplicationFactor, Load: cfg.Cluster.LoadFactor})
	if err != nil {
		return nil, err
	}
	c := &clusterPart{n: n, ring: rg, members: map[string]cluster.Member{},
		client: peer.NewClient(peer.ClientConfig{Self: cfg.Node.Name, Secret: cfg.Cluster.Secret, Timeout: cfg.Cluster.ForwardTimeout.D()})}
	rc := replica.DefaultConfig()
	rc.Self, rc.Replication = cfg.Node.Name, cfg.Cluster.Replication
	rc.NearCacheBytes, rc.NearCacheTTL = cfg.Cluster.NearCache.MaxBytes.Int64(), cfg.Cluster.NearCache.TTL.D()
	rc.HandoffInterval = n.opts.Timings.Handoff
	rc.Ring, rc.Members, rc.Transport = rg, memberAddrs{c}, c.client
	rc.Observer, rc.Logger, rc.Now = n.metrics, n.log.With("subsystem", "replica"), n.opts.Now
	if c.rep, err = replica.New(rc); err != nil {
		return nil, err
	}
	return c, nil
}

// start joins the cluster. httpAddr is the bound API address to advertise.
func (c *clusterPart) start(ctx context.Context, httpAddr, raftAddr string) error {
	cfg := c.n.cfg
	mc := cluster.DefaultMembershipConfig()
	mc.Name, mc.BindAddr, mc.Join, mc.Secret = cfg.Node.Name, cfg.Node.Gossip, cfg.Node.Join, cfg.Cluster.Secret
	mc.HTTPAddr, mc.RaftAddr = advertised(cfg.Node.Advertise, httpAddr), raftAddr
	if cfg.Node.Advertise != "" {
		_, port, _ := net.SplitHostPort(cfg.Node.Gossip)
		mc.AdvertiseAddr = net.JoinHostPort(cfg.Node.Advertise, port)
	}
	mc.RejoinInterval = cfg.Cluster.RejoinInterval.D()
	mc.Logger = c.n.log.With("subsystem", "gossip")
	mc.Timings = c.n.opts.Timings.Gossip
	ml, err := cluster.NewMembership(mc)
	if err != nil {
		return err
	}
	c.ml, c.leaveIn = ml, mc.Timings.LeaveTimeout
	if c.n.raft != nil && c.n.raft.node.HasState() {
		// Restarted with Raft state: say so in the very first gossip. Before
		// Start this only sets the flag and cannot fail.
		_ = ml.SetBootstrapped(true, 0)
	}
	if err := ml.Start(ctx); err != nil {
		return fmt.Errorf("node: gossip on node.gossip %s: %w", cfg.Node.Gossip, err)
	}
	c.rep.Start()
	c.wg.Add(1)
	go c.watch()
	return nil
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

// watch turns membership events into ring changes (the ring never sees
// memberlist), tells replication of members coming up, and lets Raft
// reconcile its voters.
func (c *clusterPart) watch() {
	defer c.wg.Done()
	for ev := range c.ml.Events() {
		c.mu.Lock()
		c.members[ev.Member.Name] = ev.Member
		c.mu.Unlock()
		switch ev.Type {
		case cluster.EventJoin, cluster.EventUpdate:
			if ev.Member.State == cluster.Alive {
				if err := c.ring.Add(ev.Member.Name); err != nil {
					c.n.log.Error("ring add", "member", ev.Member.Name, "err", err)
				}
				c.rep.MemberUp(ev.Member.Name)
			}
		case cluster.EventLeave, cluster.EventFail:
			c.ring.Remove(ev.Member.Name)
		}
		c.n.log.Info("membership", "event", ev.Type.String(), "member", ev.Member.Name, "state", ev.Member.State.String())
		if c.n.raft != nil {
			c.n.raft.gossip.Reconcile()
		}
	}
}

func (c *clusterPart) member(name string) (cluster.Member, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.members[name]
	return m, ok
}

// memberAddrs is the member table as replication addresses it.
type memberAddrs struct{ c *clusterPart }

func (m memberAddrs) Member(name string) (replica.Member, bool) {
	mb, ok := m.c.member(name)
	return replica.Member{Name: mb.Name, Addr: mb.HTTPAddr}, ok
}

func (m memberAddrs) Live() []replica.Member {
	if m.c.ml == nil {
		return nil
	}
	var out []replica.Member
	for _, mb := range m.c.ml.Members() {
		if mb.State == cluster.Alive {
			out = append(out, replica.Member{Name: mb.Name, Addr: mb.HTTPAddr})
		}
	}
	return out
}

// ready: the node has joined (it sees itself on the ring).
func (c *clusterPart) ready() error {
	for _, m := range c.ring.Members() {
		if m == c.n.cfg.Node.Name {
			return nil
		}
	}
	return errors.New("not on the ring yet")
}

// MemberStatus is one member in /-/cluster.
type MemberStatus struct {
	Name   string  `json:"name"`
	State  string  `json:"state"`
	HTTP   string  `json:"http"`
	Gossip string  `json:"gossip"`
	Raft   string  `json:"raft,omitempty"`
	Share  float64 `json:"ring_share"`
}

func (c *clusterPart) status() []MemberStatus {
	shares := c.ring.Shares()
	var out []MemberStatus
	for _, m := range c.ml.Members() {
		out = append(out, MemberStatus{Name: m.Name, State: m.State.String(), HTTP: m.HTTPAddr,
			Gossip: m.GossipAddr, Raft: m.RaftAddr, Share: shares[m.Name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// leave announces a graceful departure in gossip (peers stop routing to
// this node; its Raft seat is kept). Calling it twice is harmless.
func (c *clusterPart) leave() {
	if c.ml == nil {
		return
	}
	if err := c.ml.Leave(c.leaveIn); err != nil {
		c.n.log.Warn("gossip leave", "err", err)
	}
}

// close announces a graceful departure if asked, then stops gossip (which
// ends watch), replication, and the client they shared.
func (c *clusterPart) close(graceful bool) {
	if c.ml != nil {
		if graceful {
			c.leave()
		}
		c.ml.Close()
	}
	c.wg.Wait()
	c.rep.Close()
	c.client.Close()
}
