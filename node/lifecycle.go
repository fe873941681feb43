package node

import (
	"context"
	"fmt"

	"github.com/levee/levee/metrics"
	"github.com/levee/levee/routecfg"
)

// The node's lifecycle: start in order, stop in reverse order, and the
// addresses it bound.

// Start loads the saved cache, serves node.http, then starts Raft (so its
// bound address can be gossiped) and gossip. It returns once the
// listeners are bound, so HTTPAddr is valid (node.http may use port 0).
func (n *Node) Start(ctx context.Context) error {
	if n.persist != nil {
		n.persist.Load()
		n.persist.Start()
	}
	l, err := n.api.Listen(n.cfg.Node.HTTP, routecfg.Listen(n.cfg.Node))
	if err != nil {
		return fmt.Errorf("node: node.http: %w", err)
	}
	n.http = l
	if n.cfg.Node.Admin != "" {
		if n.admin, err = n.api.ListenAdmin(n.cfg.Node.Admin, routecfg.Listen(n.cfg.Node)); err != nil {
			return fmt.Errorf("node: node.admin: %w", err)
		}
	}
	if err := n.listenInternal(); err != nil {
		return err
	}
	if err := n.startCluster(ctx); err != nil {
		return err
	}
	n.log.Info("node started", "http", n.HTTPAddr(), "routes", len(n.cfg.Routes), "clustered", n.cluster != nil)
	return nil
}

// startCluster starts the node's Raft log (a damaged store runs degraded:
// control.Plane.Start, control.Solo.Start; a single node's refuses a
// cluster member's data dir), then the queue's runner, which delivers
// only while this node leads the log, then with node.gossip (which needs
// node.raft) gossip, which advertises Raft's address ("" when degraded:
// Raft did not start, the port still serves peers), and the publishing of
// Raft state to it.
func (n *Node) startCluster(ctx context.Context) error {
	if err := n.raftLog.Start(ctx); err != nil {
		return err
	}
	n.jobs.Start()
	if n.cluster == nil {
		return nil
	}
	if err := n.cluster.Start(ctx, n.HTTPAddr(), n.raft.Node.Addr(), n.internal.Addr().String(), n.raft.Node.HasState()); err != nil {
		return err
	}
	n.raft.Gossip.StartPublishing()
	return nil
}

// HTTPAddr is the address the API listens on.
func (n *Node) HTTPAddr() string {
	if n.http == nil {
		return n.cfg.Node.HTTP
	}
	return n.http.Addr()
}

// AdminAddr is the address of the admin port (node.admin); "" without one
// or before Start.
func (n *Node) AdminAddr() string {
	if n.admin == nil {
		return ""
	}
	return n.admin.Addr()
}

// InternalAddr is the address of the internal port (node.raft): Raft and
// peer messages, mutual TLS only. "" without node.raft or before Start.
func (n *Node) InternalAddr() string {
	if n.internal == nil {
		return ""
	}
	return n.internal.Addr().String()
}

// Metrics exposes the node's series (tests and benchmarks read counters).
func (n *Node) Metrics() *metrics.Metrics { return n.metrics }

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Node.Name }

// Close stops the node gracefully, keeping its Raft seat (a stop is not a
// leave, see consensus/seat.go): give up the seat first only when
// node.leave_on_terminate says so, announce the gossip leave (peers stop
// routing to us), hand off Raft leadership, stop accepting and drain
// requests in flight (bounded by node.shutdown_timeout), stop background
// refreshes, then close Raft, gossip, upstream connections and the cache.
// Safe to call twice, and before Start.
func (n *Node) Close() error { return n.close(true) }

// Crash stops the node the way a killed process would look to its peers:
// no leave is announced and Raft leadership is not handed off. Tests use it
// to simulate node death.
func (n *Node) Crash() error { return n.close(false) }

func (n *Node) close(graceful bool) error {
	n.closeOnce.Do(func() {
		if graceful { // /-/readyz answers 503 for node.drain_delay, so load balancers take the node out before it leaves
			n.api.Drain(n.cfg.Node.DrainDelay.D())
		}
		if n.raft != nil {
			n.raft.Gossip.StopPublishing() // before gossip changes under it
		}
		n.jobs.Stop(graceful) // before leadership moves: hands its jobs back
		if graceful {
			n.announceStop()
		}
		n.drain(graceful)
		n.engine.Close()
		if n.persist != nil {
			n.persist.Stop(graceful) // a kill saves nothing: the last periodic save stands
		}
		n.closeErr = n.raftLog.Close() // a Plane's: the pauses' and the budget's proposals, then Raft
		if n.internal != nil {
			n.internal.Close()
		}
		if n.cluster != nil {
			n.cluster.Close()
		}
		n.upstream.Close()
		n.cache.Close()
		n.log.Info("node stopped", "graceful", graceful)
	})
	return n.closeErr
}

// announceStop tells the cluster this node is going: gossip hears a leave
// (peers stop routing to it), then a leader hands leadership over, or,
// with node.leave_on_terminate, the node gives up its Raft seat. The
// gossip leave comes first so the leader, seeing the node alive, does not
// add it straight back as a voter.
func (n *Node) announceStop() {
	if n.cluster != nil {
		n.cluster.Leave()
	}
	if n.raft != nil {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Node.ShutdownTimeout.D())
		defer cancel()
		n.raft.AnnounceStop(ctx, n.cfg.Node.Name, n.cfg.Node.LeaveOnTerminate)
	}
}

// drain stops the API's ports, the peer messages' server with them
// (api.Server.Shutdown has the order): gracefully within
// node.shutdown_timeout, or at once.
func (n *Node) drain(graceful bool) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Node.ShutdownTimeout.D())
	defer cancel()
	if !graceful {
		cancel()
	}
	n.api.Shutdown(ctx)
}
