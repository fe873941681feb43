package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/cachefile"
	"github.com/levee/levee/cluster"
	"github.com/levee/levee/clustertls"
	"github.com/levee/levee/config"
	"github.com/levee/levee/connmux"
	"github.com/levee/levee/control"
	"github.com/levee/levee/mesh"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/pacing"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/reload"
	"github.com/levee/levee/replica"
	"github.com/levee/levee/routecfg"
	"github.com/levee/levee/store"
	"github.com/levee/levee/ui"
	"github.com/levee/levee/upstream"
)

// cacheFile is where cache.persist keeps the cache between runs.
const cacheFile = "cache.snapshot"

// nowFunc is the node's clock.
type nowFunc = func() time.Time

// Options are the parts of a node that are not configuration: they let tests
// inject a clock, an upstream transport and a logger.
type Options struct {
	// Logger is the node's root logger. Default: discard.
	Logger *slog.Logger
	// Transport carries upstream calls. Default: upstream's tuned transport.
	Transport http.RoundTripper
	// Now is the clock for the cache, breaker and engine. Default time.Now.
	Now nowFunc
	// Timings are the node's failure-detection and spread timings. Default:
	// each zero field takes its part's default (see Timings).
	Timings Timings
	// Raft keeps the Raft log (the control plane's, or a single node's
	// own) in memory, snapshots it every few entries, or carries it over
	// a transport tests partition (control.Stores). Default: the config
	// file's way, in node.data_dir over node.raft.
	Raft control.Stores
	// WrapPeerTransport, when set, wraps the transport of node-to-node
	// calls (tests inject one that cuts links). Default nil.
	WrapPeerTransport func(http.RoundTripper) http.RoundTripper
	// LoadConfig reads the config again, as the node was started with it
	// (file, env, flags), for SIGHUP and POST /-/reload
	// (ReloadFromSource). Default nil: nothing to read again.
	LoadConfig func() (*config.Config, error)
	// OnReload is called with each config a reload applied (the caller's
	// log level). Default nil.
	OnReload func(*config.Config)
}

// Node is one running Levee node: it constructs its parts, starts them in
// order and stops them in reverse order. The parts get the narrow
// functions they need from each other, never the Node.
type Node struct {
	cfg  *config.Config
	opts Options
	log  *slog.Logger

	metrics  *metrics.Metrics
	cache    *store.Cache
	upstream *upstream.Client
	pauses   *pacing.Pauser // the hosts' pauses: the control plane's, or this node's own
	table    *breaker.Table
	history  ui.History // the breakers' last transitions, for the operator page
	// routeHost gives the upstream host each route calls: an open breaker
	// stays open while its host is paused (breaker.Config.Hold).
	routeHost func(route string) (host string, ok bool)
	engine    *proxy.Engine
	api       *api.Server
	cluster   *mesh.Mesh           // nil on a single node
	raft      *control.Plane       // nil without node.raft
	raftLog   raftLog              // raft, or without node.raft the queue's own log (control.Solo)
	jobs      *queue.Part          // the job queue, over raftLog
	persist   *cachefile.Keeper    // nil without cache.persist
	identity  *clustertls.Identity // this node's certificate; nil without node.raft
	http      *api.Listener        // set by Start
	admin     *api.Listener        // node.admin; set by Start
	internal  *connmux.Mux         // node.raft: Raft and peer messages; set by Start

	left     chan struct{} // closed once Leave has given up the Raft seat
	leftOnce sync.Once

	reloader  *reload.Reloader
	closeOnce sync.Once
	closeErr  error
}

// New wires a node from a validated config. It does no I/O.
func New(cfg *config.Config, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	n := &Node{cfg: cfg, opts: opts, log: opts.Logger.With("node", cfg.Node.Name), metrics: metrics.New(), left: make(chan struct{})}
	if err := n.wire(); err != nil {
		return nil, err
	}
	return n, nil
}

// wire builds the parts in dependency order: cache and upstream, the
// cluster (gossip, ring, replication), the breaker (Raft-replicated with a
// local guard, or local), the engine over all of them, the job queue
// (over the cluster's Raft log, or the node's own), and the API.
func (n *Node) wire() error {
	var err error
	if n.cache, err = store.New(store.Config{MaxBytes: n.cfg.Cache.MaxBytes.Int64(), Now: n.opts.Now}); err != nil {
		return err
	}
	if n.cfg.Node.Raft != "" { // the internal port's certificate
		if n.identity, err = clustertls.ForNode(n.cfg.Node.Name, n.cfg.Cluster); err != nil {
			return err
		}
	}
	if n.cfg.Node.Gossip != "" {
		if n.cluster, err = mesh.New(n.cfg, mesh.Deps{Identity: n.identity, GossipTimings: n.opts.Timings.GossipTimings,
			WrapTransport: n.opts.WrapPeerTransport, Observer: n.metrics, Tombstones: n.cache, Now: n.opts.Now, Logger: n.log}); err != nil {
			return err
		}
	}
	n.reloader, err = reload.New(reload.Config{Running: n.cfg, Load: n.opts.LoadConfig, OnReload: n.opts.OnReload,
		Logger: n.log.With("subsystem", "reload")})
	if err != nil {
		return err
	}
	n.table = breaker.NewTable(n.onTransition)
	if n.routeHost, err = routecfg.RouteHost(n.cfg); err != nil {
		return err
	}
	if n.raftLog, err = n.newRaftLog(); err != nil {
		return err
	}
	gate, proposer, err := n.wireBreaker()
	if err != nil {
		return err
	}
	if err := n.wireUpstream(); err != nil {
		return err
	}
	if err := n.wireEngine(gate); err != nil {
		return err
	}
	if n.jobs, err = n.newJobs(); err != nil {
		return err
	}
	if n.cfg.Cache.Persist { // the cache between runs, in data_dir
		n.persist = replica.CacheFile(filepath.Join(n.cfg.Node.DataDir, cacheFile), n.cfg.Cache.PersistInterval.D(),
			n.cache.All(), n.engine.Put, n.log.With("subsystem", "persist"))
	}
	if err := n.wireAPI(proposer); err != nil {
		return err
	}
	n.registerGauges()
	return nil
}

// wireBreaker returns the gate the engine uses and the proposer admin
// commands go through: Raft-replicated with a local guard when node.raft is
// set, else a local breaker.
func (n *Node) wireBreaker() (proxy.Gate, breaker.Proposer, error) {
	if n.raft == nil {
		n.pauses = &pacing.Pauser{Node: n.cfg.Node.Name, Now: n.opts.Now}
		local := breaker.NewLocal(n.table)
		b, err := breaker.New(breaker.Config{Node: n.cfg.Node.Name, Proposer: local, Reader: local, Now: n.opts.Now,
			Hold: n.pauses.Hold(n.routeHost)})
		return proxy.GateFunc(b.AllowCall), local, err
	}
	n.pauses = n.raft.Pauser
	if n.cluster != nil { // after the ring and replication, which subscribed first
		n.cluster.Membership.Subscribe(func(cluster.Event) { n.raft.Gossip.Reconcile() })
	}
	return n.raft, n.raft.Proposer, nil
}

// wireUpstream builds the upstream client, paced by the hosts' pauses
// (n.pauses, the breaker's too: the control plane's, or this node's own
// without Raft), and capped by its share of the cluster-wide caps (hosts:,
// upstream.max_inflight), recomputed on every membership event.
func (n *Node) wireUpstream() error {
	rtls, err := routecfg.TLS(n.cfg)
	if err != nil {
		return err
	}
	hosts, global := routecfg.Caps(n.cfg)
	n.upstream, err = upstream.New(upstream.Config{Transport: n.opts.Transport, RouteTLS: rtls, Logger: n.log.With("subsystem", "upstream"),
		Observer: n.metrics, MaxCalls: n.cfg.Node.MaxInflightFetches, Pacing: n.pauses, Budget: n.raft.UpstreamBudget(), Hosts: hosts, GlobalInflight: global})
	if err != nil {
		return err
	}
	if n.cluster != nil { // the caps are cluster-wide: this node takes its share of the live members'
		n.cluster.Membership.Subscribe(func(cluster.Event) { n.upstream.SetShare(n.cluster.Live()) })
	}
	return nil
}

func (n *Node) wireEngine(gate proxy.Gate) error {
	routes, err := routecfg.Routes(n.cfg)
	if err != nil {
		return err
	}
	pc := proxy.Config{
		Node: n.cfg.Node.Name, Routes: routes, Cache: n.cache, Upstream: n.upstream,
		Breaker: gate, Observer: n.metrics, Logger: n.log.With("subsystem", "proxy"), Now: n.opts.Now,
	}
	if n.cluster != nil {
		rep := n.cluster.Replicator
		pc.OnStore, pc.Recover, pc.CanRecover, pc.Owns = rep.OnStore, rep.Recover, rep.CanRecover, rep.Owns
		pc.OnInvalidate, pc.OnPurge = rep.OnInvalidate, rep.Purge
		pc.Resumed = n.cluster.Pause.Resumed
	}
	n.engine, err = proxy.New(pc)
	return err
}

func (n *Node) wireAPI(proposer breaker.Proposer) error {
	var admin api.Breakers = &breaker.Admin{Node: n.cfg.Node.Name, Table: n.table, Proposer: proposer, OpenFor: n.engine.OpenFor, Now: n.opts.Now,
		Hold: n.pauses.Hold(n.routeHost)}
	if n.raft != nil {
		admin = n.raft.Breakers(admin.(*breaker.Admin))
	}
	ac := api.Config{
		Node: n.cfg.Node.Name, Routes: routecfg.Infos(n.cfg), Engine: n.engine,
		Breakers: admin, Metrics: n.metrics.Handler(),
		MaxRequestBody: n.cfg.Node.MaxRequestBody.Int64(), AdminToken: n.cfg.Cluster.AdminToken,
		Observer: n.metrics, Logger: n.log.With("subsystem", "api"), Now: n.opts.Now, AccessLog: n.cfg.Node.AccessLogShare(),
		Ready: n.ready, Status: n.status, AdminSeparate: n.cfg.Node.Admin != "",
		Purge: n.engine, Jobs: n.jobs.Service,
	}
	if n.cluster != nil {
		ac.Peers, ac.Held, ac.Joined = n.cluster.Replicator, n.cluster.Pause.Held, n.cluster.WaitJoined
	}
	if n.raft != nil {
		ac.Seats = n.seats()
	}
	ac.Reload = n.reloader.FromSource
	var err error
	if n.api, err = api.New(ac); err != nil {
		return err
	}
	n.reloader.Bind(reload.Targets{SetRoutes: n.engine.SetRoutes, SetHosts: n.upstream.SetHosts, SetAdminToken: n.api.SetAdminToken})
	n.api.Handle("/-/ui/", n.operatorPage(admin.Views))
	return nil
}

// listenInternal binds node.raft, the internal port, and serves on it the
// node-to-node endpoints of the parts this node runs (replication's, and
// the Raft leader's end of forwarding); Raft takes the port's other
// connections when it starts. Every connection is mutual TLS with the
// cluster's certificates, and a peer message's sender is the node its
// certificate names.
func (n *Node) listenInternal() error {
	if n.raft == nil {
		return nil
	}
	var err error
	n.internal, err = connmux.Listen(n.cfg.Node.Raft, n.cfg.Node.Advertise,
		connmux.Config{TLS: n.identity.ServerConfig(), Logger: n.log.With("subsystem", "internal")})
	if err != nil {
		return fmt.Errorf("node: internal port node.raft %s: %w", n.cfg.Node.Raft, err)
	}
	pc := api.PeerConfig{Sender: clustertls.NameOf, Streams: n.internal.Listener(connmux.KindStream)}
	if n.cluster != nil {
		pc.Endpoints = n.cluster.PeerEndpoints(n.engine, n.metrics)
	}
	pc.Raft, pc.RaftRemove = n.raft.Node, n.raft.Node
	n.api.ServePeers(n.internal.Listener(connmux.KindPeer), pc) // stopped by n.api.Shutdown
	n.internal.Serve()
	return nil
}

// ready: serving, and in a cluster, on the ring. Raft is not required:
// availability comes first, and the local guard covers a missing quorum.
func (n *Node) ready() error {
	if n.http == nil {
		return errors.New("not listening")
	}
	if err := n.raftLog.Ready(); err != nil {
		return err
	}
	if n.cluster != nil {
		return n.cluster.Ready()
	}
	return nil
}

// Status is the node's /-/cluster document.
type Status = api.ClusterStatus

func (n *Node) status() api.ClusterStatus {
	st := Status{Node: n.cfg.Node.Name, HTTP: n.cfg.Node.Advertised(n.HTTPAddr())}
	if n.cluster != nil {
		st.Members = n.cluster.Status()
	}
	if len(st.Members) == 0 {
		st.Members = []cluster.MemberStatus{{Name: n.cfg.Node.Name, State: "alive", HTTP: n.HTTPAddr(), Share: 1}}
	}
	if n.raft != nil {
		rs := n.raft.Node.Status()
		st.Raft = &rs
	}
	return st
}

// registerGauges has each part register its own series; the leaves
// (store, upstream) import no metrics, so their readers are handed in.
func (n *Node) registerGauges() {
	n.metrics.CacheGauges(func() metrics.CacheStats { return metrics.CacheStats(n.cache.Stats()) }, n.cfg.Cache.MaxBytes.Int64())
	n.metrics.UpstreamGauges(n.upstream)
	n.api.Gauges(n.metrics) // its ports' connections
	n.engine.Gauges(n.metrics)
	n.pauses.Gauges(n.metrics)
	n.jobs.Runner.Gauges(n.metrics, n.opts.Now)
	if n.cluster != nil {
		n.cluster.Membership.Gauges(n.metrics)
		n.cluster.Pause.Gauges(n.metrics)
	}
	n.raftLog.Gauges(n.metrics)
}

// seats are the explicit ways out of the Raft configuration (api.Seats).
func (n *Node) seats() control.Seats {
	s := control.Seats{Self: n.cfg.Node.Name, Raft: n.raft.Node, Logger: n.log,
		Left: func() { n.leftOnce.Do(func() { close(n.left) }) }}
	if n.cluster != nil {
		s.LeaveGossip, s.Member = n.cluster.Leave, n.cluster.Membership.Member
	}
	return s
}

// Left is closed once the node has given up its Raft seat through
// POST /-/leave; the process then stops (cmd/node).
func (n *Node) Left() <-chan struct{} { return n.left }

func (n *Node) onTransition(t breaker.Transition) {
	n.metrics.BreakerTransition(t.Route, t.From.String(), t.To.String(), int(t.To))
	n.history.Record(t)
	n.log.Info("breaker transition", "route", t.Route, "from", t.From.String(), "to", t.To.String(),
		"by", t.Node, "reason", t.Reason)
}
