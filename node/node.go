package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/config"
	"github.com/levee/levee/metrics"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
	"github.com/levee/levee/upstream"
)

// Options are the parts of a node that are not configuration: they let tests
// inject a clock, an upstream transport and a logger.
type Options struct {
	// Logger is the node's root logger. Default: discard.
	Logger *slog.Logger
	// Transport carries upstream calls. Default: upstream's tuned transport.
	Transport http.RoundTripper
	// Now is the clock for the cache, breaker and engine. Default time.Now.
	Now func() time.Time
}

// Node is one running Levee node.
type Node struct {
	cfg  *config.Config
	opts Options
	log  *slog.Logger

	metrics  *metrics.Metrics
	cache    *store.Cache
	upstream *upstream.Client
	table    *breaker.Table
	breaker  *breaker.Breaker
	engine   *proxy.Engine
	api      *api.Server

	ln      net.Listener
	srv     *http.Server
	serveWG sync.WaitGroup

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
	n := &Node{cfg: cfg, opts: opts, log: opts.Logger.With("node", cfg.Node.Name), metrics: metrics.New()}
	if err := n.wireCore(); err != nil {
		return nil, err
	}
	return n, nil
}

// wireCore builds the single-node pipeline: cache → breaker → retry →
// upstream, behind the API.
func (n *Node) wireCore() error {
	var err error
	n.cache, err = store.New(store.Config{MaxBytes: n.cfg.Cache.MaxBytes.Int64(), Now: n.opts.Now})
	if err != nil {
		return err
	}
	n.upstream, err = upstream.New(upstream.Config{
		Transport: n.opts.Transport,
		Logger:    n.log.With("subsystem", "upstream"),
		Observer:  n.metrics,
	})
	if err != nil {
		return err
	}
	n.table = breaker.NewTable(n.onTransition)
	local := breaker.NewLocal(n.table)
	n.breaker, err = breaker.New(breaker.Config{Node: n.cfg.Node.Name, Proposer: local, Reader: local, Now: n.opts.Now})
	if err != nil {
		return err
	}
	routes, err := proxyRoutes(n.cfg)
	if err != nil {
		return err
	}
	n.engine, err = proxy.New(proxy.Config{
		Node: n.cfg.Node.Name, Routes: routes, Cache: n.cache, Upstream: n.upstream,
		Breaker: breakerGate{n.breaker}, Observer: n.metrics, Logger: n.log.With("subsystem", "proxy"), Now: n.opts.Now,
	})
	if err != nil {
		return err
	}
	n.registerGauges()
	n.api, err = api.New(api.Config{
		Node: n.cfg.Node.Name, Routes: routeInfos(n.cfg), Engine: n.engine,
		Breakers: &breakerAdmin{n: n, proposer: local}, Metrics: n.metrics.Handler(),
		MaxRequestBody: n.cfg.Node.MaxRequestBody.Int64(), AdminToken: n.cfg.Cluster.AdminToken,
		Observer: n.metrics, Logger: n.log.With("subsystem", "api"), Now: n.opts.Now,
	})
	return err
}

func (n *Node) registerGauges() {
	n.metrics.GaugeFunc("levee_cache_entries", "Entries in the cache.", func() float64 { return float64(n.cache.Stats().Entries) })
	n.metrics.GaugeFunc("levee_cache_bytes", "Weight of the cache's entries in bytes.", func() float64 { return float64(n.cache.Stats().Bytes) })
	n.metrics.GaugeFunc("levee_fetches_inflight", "Upstream fetches in flight (after coalescing).", func() float64 { return float64(n.engine.InFlight()) })
}

func (n *Node) onTransition(t breaker.Transition) {
	n.metrics.BreakerTransition(t.Route, t.From.String(), t.To.String(), int(t.To))
	n.log.Info("breaker transition", "route", t.Route, "from", t.From.String(), "to", t.To.String(),
		"by", t.Node, "reason", t.Reason)
}

// Start listens on node.http and serves. It returns once the listener is
// bound, so HTTPAddr is valid (node.http may use port 0).
func (n *Node) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", n.cfg.Node.HTTP)
	if err != nil {
		return fmt.Errorf("node: listen on node.http %s: %w", n.cfg.Node.HTTP, err)
	}
	n.ln = ln
	n.srv = &http.Server{
		Handler:           n.api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    int(n.cfg.Node.MaxHeaderBytes.Int64()),
		ErrorLog:          slog.NewLogLogger(n.log.With("subsystem", "http").Handler(), slog.LevelDebug),
	}
	n.serveWG.Add(1)
	go func() {
		defer n.serveWG.Done()
		if err := n.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server stopped", "err", err)
		}
	}()
	n.log.Info("node started", "http", n.HTTPAddr(), "routes", len(n.cfg.Routes))
	return nil
}

// HTTPAddr is the address the API listens on.
func (n *Node) HTTPAddr() string {
	if n.ln == nil {
		return n.cfg.Node.HTTP
	}
	return n.ln.Addr().String()
}

// Metrics exposes the node's series (tests and benchmarks read counters).
func (n *Node) Metrics() *metrics.Metrics { return n.metrics }

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Node.Name }

// Close shuts the node down in order: stop accepting and drain requests in
// flight (bounded by node.shutdown_timeout), then stop background
// refreshes, then close upstream connections and the cache. Safe to call
// twice, and before Start.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Node.ShutdownTimeout.D())
			n.closeErr = n.srv.Shutdown(ctx)
			cancel()
			if n.closeErr != nil {
				n.srv.Close()
			}
			n.serveWG.Wait()
		}
		n.engine.Close()
		n.upstream.Close()
		n.cache.Close()
		n.log.Info("node stopped")
	})
	return n.closeErr
}

// breakerAdmin backs /-/breakers with the table this node reads and the
// proposer that commits admin commands.
type breakerAdmin struct {
	n        *Node
	proposer breaker.Proposer
}

func (b *breakerAdmin) Views() []breaker.View { return b.n.table.Views() }

func (b *breakerAdmin) ForceOpen(ctx context.Context, route string) error {
	return b.force(ctx, route, breaker.OpForceOpen)
}

func (b *breakerAdmin) ForceClose(ctx context.Context, route string) error {
	return b.force(ctx, route, breaker.OpForceClose)
}

func (b *breakerAdmin) force(ctx context.Context, route string, op breaker.Op) error {
	rt, ok := b.n.engine.Route(route)
	if !ok {
		return fmt.Errorf("%w: %q", proxy.ErrUnknownRoute, route)
	}
	_, err := b.proposer.Propose(ctx, breaker.Command{
		V: breaker.CommandVersion, Op: op, Route: route, Node: b.n.cfg.Node.Name,
		At: b.n.opts.Now().UnixNano(), OpenFor: int64(rt.Breaker.OpenFor),
	})
	return err
}
