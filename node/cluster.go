package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"

	"sync"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/ring"
	"github.com/levee/levee/store"
)

// clusterPart is everything a node runs only in a cluster: membership,
// the ring fed from it, forwarding to owners, replication to replicas and
// the near cache. It implements api.Peers, api.ReplicaSink and
// api.ReplicaSource.
type clusterPart struct {
	n       *Node
	ml      *cluster.Membership
	leaveIn time.Duration // the gossip timings' LeaveTimeout
	ring    *ring.Ring
	client  *peer.Client
	near    *nearCache // nil when disabled
	repl    chan replJob
	handoff *handoff

	mu      sync.RWMutex
	members map[string]cluster.Member // last known, including dead ones

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

type replJob struct {
	addr  string
	entry *peer.Entry
}

// replQueue bounds the replication backlog; a full queue drops the push (a
// replica is an optimisation for failover, never required for correctness).
const replQueue = 4096

func newClusterPart(n *Node) (*clusterPart, error) {
	cfg := n.cfg
	rg, err := ring.New(ring.Config{Partitions: cfg.Cluster.Partitions, ReplicationFactor: ring.DefaultConfig().ReplicationFactor, Load: cfg.Cluster.LoadFactor})
	if err != nil {
		return nil, err
	}
	c := &clusterPart{n: n, ring: rg, members: map[string]cluster.Member{}, repl: make(chan replJob, replQueue), handoff: newHandoff(),
		client: peer.NewClient(peer.ClientConfig{Self: cfg.Node.Name, Secret: cfg.Cluster.Secret, Timeout: cfg.Cluster.ForwardTimeout.D()})}
	if mb := cfg.Cluster.NearCache.MaxBytes.Int64(); mb > 0 {
		nc, err := store.New(store.Config{MaxBytes: mb, Now: n.opts.Now})
		if err != nil {
			return nil, err
		}
		c.near = &nearCache{c: nc, ttl: cfg.Cluster.NearCache.TTL.D(), now: n.opts.Now}
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
	loopCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(4)
	go c.watch()
	go c.replicate(loopCtx)
	go c.replicate(loopCtx)
	go c.handoffLoop(loopCtx)
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
// memberlist) and lets Raft reconcile its voters.
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
				// It may be back from a crash or a partition, empty or
				// behind: whatever it should hold is owed to it again.
				c.handoff.forget(ev.Member.Name)
				c.handoff.poke()
			}
		case cluster.EventLeave, cluster.EventFail:
			c.ring.Remove(ev.Member.Name)
		}
		c.n.log.Info("membership", "event", ev.Type.String(), "member", ev.Member.Name, "state", ev.Member.State.String())
		if c.n.raft != nil {
			c.n.raft.reconcile()
		}
	}
}

func (c *clusterPart) member(name string) (cluster.Member, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.members[name]
	return m, ok
}

// Owner implements api.Peers.
func (c *clusterPart) Owner(key string) (string, bool) {
	owner, ok := c.ring.Owner(key)
	if !ok {
		return c.n.cfg.Node.Name, true
	}
	return owner, owner == c.n.cfg.Node.Name
}

// Forward implements api.Peers: near cache first, then the owner.
func (c *clusterPart) Forward(ctx context.Context, node, key string, r *proxy.Request) (*proxy.Response, error) {
	if c.near != nil {
		if resp, ok := c.near.get(r.Method, key, r.Header); ok {
			c.n.metrics.NearCache.WithLabelValues("hit").Inc()
			return resp, nil
		}
		c.n.metrics.NearCache.WithLabelValues("miss").Inc()
	}
	m, ok := c.member(node)
	if !ok || m.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: no address for %s", peer.ErrUnreachable, node)
	}
	fr, err := c.client.Forward(ctx, m.HTTPAddr, api.ForwardRequestOf(r))
	var remote *peer.RemoteError
	switch {
	case errors.As(err, &remote):
		c.n.metrics.Forwarded.WithLabelValues(node, "remote-error").Inc()
		return nil, err
	case err != nil:
		c.n.metrics.Forwarded.WithLabelValues(node, "unreachable").Inc()
		return nil, err
	}
	c.n.metrics.Forwarded.WithLabelValues(node, "ok").Inc()
	resp := api.ResponseOf(fr)
	if c.near != nil {
		c.near.put(r.Method, key, r.Header, resp)
	}
	return resp, nil
}

// onStore queues a new or renewed entry for the key's replicas: the nodes
// that take the key over, in order, when its owner goes. An entry stored
// while this node is not the owner (it served because the owner was
// unreachable) is also kept for hand-off: the owner must get it once it can
// be reached, or it would serve its older copy after this newer one.
func (c *clusterPart) onStore(rkey, key string, e *store.Entry) {
	if _, self := c.Owner(rkey); !self {
		c.keepForHandoff(peerEntry(rkey, key, e))
	}
	extra := c.n.cfg.Cluster.Replication
	if extra <= 0 {
		return
	}
	for _, name := range c.ring.Replicas(rkey, 1+extra) {
		if name == c.n.cfg.Node.Name {
			continue
		}
		m, ok := c.member(name)
		if !ok || m.HTTPAddr == "" {
			continue
		}
		job := replJob{addr: m.HTTPAddr, entry: peerEntry(rkey, key, e)}
		select {
		case c.repl <- job:
		default:
			c.n.metrics.Replicated.WithLabelValues("sent", "dropped").Inc()
		}
	}
}

func (c *clusterPart) replicate(ctx context.Context) {
	defer c.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-c.repl:
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := c.client.Replicate(pctx, job.addr, job.entry)
			cancel()
			outcome := "ok"
			if err != nil {
				outcome = "error"
				c.n.log.Debug("replication push failed", "to", job.addr, "err", err)
				c.keepForHandoff(job.entry) // pushed again when the replica is back
			}
			c.n.metrics.Replicated.WithLabelValues("sent", outcome).Inc()
		}
	}
}

// PutReplica implements api.ReplicaSink.
func (c *clusterPart) PutReplica(e *peer.Entry) error {
	outcome := "stale"
	if c.n.engine.Put(e.Key, storeEntry(e)) {
		outcome = "ok"
	}
	c.n.metrics.Replicated.WithLabelValues("received", outcome).Inc()
	return nil
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

// Placement implements api.Placement: owner first, then replicas.
func (c *clusterPart) Placement(key string) []string {
	return c.ring.Replicas(key, 1+c.n.cfg.Cluster.Replication)
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

// close announces a graceful departure if asked, then stops gossip and
// the loops.
func (c *clusterPart) close(graceful bool) {
	if c.ml != nil {
		if graceful {
			c.leave()
		}
		c.ml.Close()
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	c.client.Close()
	if c.near != nil {
		c.near.c.Close()
	}
}
