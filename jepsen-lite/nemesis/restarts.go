package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

// The whole-cluster nemeses. restart-all and kill-all take every node down
// at once (SIGTERM or SIGKILL) for the window and start them all again with
// their data dirs, so the cluster must recover from its own disks: Raft
// elects a leader among the old voters and replays the breaker table. A
// rolling restart takes one node down at a time and waits for the cluster
// to be whole again before the next, as an operator's upgrade does.

// stopAll stops every node at once, gracefully for restart-all and with
// SIGKILL for kill-all, and returns the undo that starts them all again in
// parallel. A node that ignored SIGTERM (killed after backend.StopTimeout)
// is noted, not an injection failure: the window still ran.
func (r *Runner) stopAll(ctx context.Context, f *history.Fault) (func(context.Context) error, error) {
	f.Targets = r.names()
	stop := func(n string) error { return r.b.Kill(n) }
	if f.Kind == RestartAll {
		// An ended run must not turn a graceful stop into a kill.
		stop = func(n string) error { return r.b.Stop(context.WithoutCancel(ctx), n) }
	}
	for _, n := range f.Targets {
		r.killed[n] = true // down until started again; HealAll restarts it
	}
	errs := eachNode(f.Targets, stop)
	for _, n := range f.Targets {
		if errors.Is(errs[n], backend.ErrStopTimeout) {
			f.Note = join(f.Note, errs[n].Error())
			f.Killed = append(f.Killed, n)
			delete(errs, n)
		}
	}
	return r.startAll(f.Targets), joinByNode(f.Targets, errs)
}

// startAll returns the undo that restarts names in parallel and waits
// until each answers /-/readyz.
func (r *Runner) startAll(names []string) func(context.Context) error {
	return func(ctx context.Context) error {
		errs := eachNode(names, func(n string) error { return r.b.Restart(ctx, n) })
		for _, n := range names {
			if errs[n] == nil {
				delete(r.killed, n)
			}
		}
		return joinByNode(names, errs)
	}
}

// roll restarts the nodes one at a time, in a seeded order: graceful stop,
// start, then wait until the cluster has rejoined before the next. The
// window is the roll itself. A node that does not come back within
// RejoinWait ends the roll: stopping another could cost the quorum. A
// roll cut short by ctx finishes the step under way and stops.
func (r *Runner) roll(ctx context.Context) active {
	a := active{fault: history.Fault{Kind: RollingRestart, Start: r.now()}}
	for _, n := range r.shuffled() {
		if ctx.Err() != nil {
			a.fault.Note = join(a.fault.Note, "run ended: roll stopped before "+n)
			break
		}
		a.fault.Targets = append(a.fault.Targets, n)
		step, note, err := r.rollStep(ctx, n)
		a.fault.Steps = append(a.fault.Steps, step)
		a.fault.Note = join(a.fault.Note, note)
		if err == nil {
			a.fault.Note = join(a.fault.Note, fmt.Sprintf("%s ready after %s, rejoined after %s", n,
				time.Duration(step.Ready-step.Stop).Round(time.Millisecond), time.Duration(step.Rejoined-step.Stop).Round(time.Millisecond)))
		}
		if err != nil {
			a.fault.Note = join(a.fault.Note, err.Error()+": roll stopped")
			break
		}
	}
	r.log.Info("rolling restart done", "steps", a.fault.Steps, "note", a.fault.Note)
	return a
}

// rollStep is one node's turn. The stop, start and rejoin wait run under a
// context detached from the run's, bounded by undoTimeout, so a node is
// never left down because the run ended. note reports a stop that needed
// SIGKILL.
func (r *Runner) rollStep(ctx context.Context, n string) (step history.Step, note string, err error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	step = history.Step{Node: n, Stop: r.now()}
	r.killed[n] = true
	if err := r.b.Stop(sctx, n); errors.Is(err, backend.ErrStopTimeout) {
		note = err.Error()
	} else if err != nil {
		return step, "", fmt.Errorf("stop %s: %w", n, err)
	}
	if err := r.b.Restart(sctx, n); err != nil {
		return step, note, fmt.Errorf("restart %s: %w", n, err)
	}
	delete(r.killed, n)
	step.Ready = r.now()
	wctx, cancel := context.WithTimeout(sctx, r.cfg.RejoinWait)
	defer cancel()
	if err := backend.WaitRejoined(wctx, r.b.Nodes()); err != nil {
		return step, note, fmt.Errorf("%s not rejoined within %v: %w", n, r.cfg.RejoinWait, err)
	}
	step.Rejoined = r.now()
	return step, note, nil
}

// eachNode runs f for every name at once and returns the failures by name.
func eachNode(names []string, f func(string) error) map[string]error {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = map[string]error{}
	)
	for _, n := range names {
		wg.Go(func() {
			if err := f(n); err != nil {
				mu.Lock()
				errs[n] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// joinByNode joins errs in the order of names, each prefixed by its node;
// nil when there are none.
func joinByNode(names []string, errs map[string]error) error {
	var out []error
	for _, n := range names {
		if err := errs[n]; err != nil {
			out = append(out, fmt.Errorf("%s: %w", n, err))
		}
	}
	return errors.Join(out...)
}
