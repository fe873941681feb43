package consensus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/levee/levee/internal/ctxwait"
)

const (
	// proposeAttempts bounds how often Propose re-targets a proposal that
	// was refused with ErrNotLeader during a leader change.
	proposeAttempts = 3
	// pollInterval is how often the Wait* helpers re-check raft.
	pollInterval = 5 * time.Millisecond
)

// Propose replicates data and returns the StateMachine's result. On the
// leader it is ApplyLocal; on a follower it goes to the leader through
// Config.Forward (nil Forward: ErrNotLeader). With no leader it waits briefly
// (a few election timeouts, within ctx) and then returns ErrNoLeader. A
// proposal refused with ErrNotLeader was not applied, so it is retried
// against the new leader; ErrTimeout means the outcome is unknown and is
// never retried here.
func (n *Node) Propose(ctx context.Context, data []byte) ([]byte, error) {
	n.stats.proposals.Add(1)
	start := time.Now()
	out, err := n.propose(ctx, data)
	if err == nil {
		n.observeCommit(start)
	}
	return out, err
}

func (n *Node) propose(ctx context.Context, data []byte) ([]byte, error) {
	var err error
	for attempt := range proposeAttempts {
		if attempt > 0 && !ctxwait.Sleep(ctx, n.cfg.Timings.HeartbeatTimeout) {
			break
		}
		var out []byte
		out, err = n.proposeOnce(ctx, data)
		if !errors.Is(err, ErrNotLeader) || n.cfg.Forward == nil {
			return out, err
		}
	}
	return nil, err
}

func (n *Node) proposeOnce(ctx context.Context, data []byte) ([]byte, error) {
	r, err := n.running()
	if err != nil {
		return nil, err
	}
	if r.State() == raft.Leader {
		return n.ApplyLocal(ctx, data)
	}
	id, addr, err := n.awaitLeader(ctx)
	if err != nil {
		return nil, err
	}
	if id == n.cfg.NodeID {
		return n.ApplyLocal(ctx, data)
	}
	if n.cfg.Forward == nil {
		return nil, fmt.Errorf("%w: leader is %s and no Forward is configured", ErrNotLeader, id)
	}
	n.stats.forwarded.Add(1)
	out, err := n.cfg.Forward(ctx, id, addr, data)
	if err != nil {
		return nil, fmt.Errorf("consensus: forward to leader %s: %w", id, err)
	}
	return out, nil
}

// ApplyLocal applies data through this node's raft, which must be the
// leader, and returns the StateMachine's result once the ApplyFuture has
// returned (committed and applied here). It is what the leader runs for a
// forwarded proposal. Errors: ErrNotLeader (not applied), ErrApply (the
// StateMachine rejected it), ErrTimeout (ctx expired or leadership was lost
// mid-commit: outcome unknown), ErrClosed.
func (n *Node) ApplyLocal(ctx context.Context, data []byte) ([]byte, error) {
	r, err := n.running()
	if err != nil {
		return nil, err
	}
	if r.State() != raft.Leader {
		_, id := r.LeaderWithID()
		return nil, fmt.Errorf("%w (leader %q)", ErrNotLeader, id)
	}
	f := r.Apply(data, enqueueTimeout(ctx, n.cfg.ConfigChangeTimeout))
	if err := n.await(ctx, f); err != nil {
		return nil, err
	}
	n.requestNudge()
	res, ok := f.Response().(applyResult)
	if !ok {
		return nil, fmt.Errorf("consensus: unexpected apply response %T", f.Response())
	}
	return res.data, res.err
}

// ApplyFromPeer is ApplyLocal for a proposal that node from, a follower,
// forwarded (the leader's end of Config.Forward); from is the sender as
// the authenticated peer call names it. A StateMachine that is a Stamper
// first checks the entry against the sender and the leader's view and
// rewrites it (the breaker refuses a command that speaks for another node
// or falls outside its route's config, and stamps the leader's clock into
// the rest, so every breaker timer runs on one clock). A refused entry is
// never appended: the error wraps ErrRefused and goes to
// Config.OnRefused.
//
// Proposals of the leader itself (Propose, ApplyLocal) are not checked:
// they come from this process, which builds them from its own config.
func (n *Node) ApplyFromPeer(ctx context.Context, from string, data []byte) ([]byte, error) {
	if st, ok := n.fsm.sm.(Stamper); ok {
		var err error
		if data, err = st.Stamp(from, data); err != nil {
			err = fmt.Errorf("%w: from %q: %w", ErrRefused, from, err)
			if n.cfg.OnRefused != nil {
				n.cfg.OnRefused(from, err)
			}
			return nil, err
		}
	}
	start := time.Now()
	out, err := n.ApplyLocal(ctx, data)
	if err == nil {
		n.observeCommit(start)
	}
	return out, err
}

// RemoveFromPeer is RemoveLocal for a removal a follower forwarded (the
// leader's end of Config.ForwardRemove).
func (n *Node) RemoveFromPeer(ctx context.Context, id string) error { return n.RemoveLocal(ctx, id) }

func (n *Node) observeCommit(start time.Time) {
	if n.cfg.OnCommit != nil {
		n.cfg.OnCommit(time.Since(start))
	}
}

// enqueueTimeout is how long raft may take to accept the entry: what is
// left of ctx, or fallback without a deadline.
func enqueueTimeout(ctx context.Context, fallback time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return fallback
}

// await waits for a raft future, ctx, or the node's Close. Returning early
// does not cancel the entry (raft futures cannot be cancelled).
//
// f.Error() runs in a goroutine of its own, outside the WaitGroup Close
// waits for: raft can leave an Apply, Barrier or configuration future
// unanswered forever when Shutdown races its commit, because only some
// futures carry raft's ShutdownCh (hashicorp/raft#498; a committed batch
// still in fsmMutateCh when the FSM loop sees shutdown is dropped). A Close
// that waited for such a future hung until CI's 15-minute timeout. The
// goroutine ends when raft answers; in that race it never does, holding
// only the future (tests tell goleak so, see ignoreUnansweredFutures).
func (n *Node) await(ctx context.Context, f raft.Future) error {
	if n.ctx.Err() != nil {
		return ErrClosed
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return mapRaftError(err)
	case <-ctx.Done():
		return fmt.Errorf("%w: outcome unknown: %w", ErrTimeout, ctx.Err())
	case <-n.ctx.Done():
		return fmt.Errorf("%w: outcome unknown", ErrClosed)
	}
}

// mapRaftError translates raft's errors into this package's sentinels,
// keeping the raft error wrapped for logs.
func mapRaftError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: outcome unknown: %w", ErrTimeout, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return fmt.Errorf("consensus: raft: %w", err)
}

// awaitLeader returns the known leader, waiting a few election timeouts
// (bounded by ctx) for one to emerge.
func (n *Node) awaitLeader(ctx context.Context) (id, addr string, err error) {
	wait := 3 * (n.cfg.Timings.HeartbeatTimeout + n.cfg.Timings.ElectionTimeout)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := n.WaitForLeader(wctx); err != nil {
		return "", "", err
	}
	id, addr = n.Leader()
	return id, addr, nil
}

// WaitForLeader blocks until a leader is known or ctx ends (ErrNoLeader).
func (n *Node) WaitForLeader(ctx context.Context) error {
	return n.poll(ctx, ErrNoLeader, func(r *raft.Raft) bool {
		_, id := r.LeaderWithID()
		return id != ""
	})
}

// WaitForApplied blocks until this node's FSM has applied index or ctx ends
// (ErrTimeout).
func (n *Node) WaitForApplied(ctx context.Context, index uint64) error {
	return n.poll(ctx, ErrTimeout, func(r *raft.Raft) bool {
		return r.AppliedIndex() >= index
	})
}

func (n *Node) poll(ctx context.Context, onCtx error, cond func(*raft.Raft) bool) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		r, err := n.running()
		if err != nil {
			return err
		}
		if cond(r) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", onCtx, ctx.Err())
		case <-n.ctx.Done():
			return ErrClosed
		case <-t.C:
		}
	}
}

// Snapshot takes a user snapshot now and compacts the log.
func (n *Node) Snapshot() error {
	r, err := n.running()
	if err != nil {
		return err
	}
	if err := r.Snapshot().Error(); err != nil {
		return fmt.Errorf("consensus: snapshot: %w", err)
	}
	return nil
}
