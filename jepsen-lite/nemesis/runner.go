package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
	"github.com/levee/levee/jepsen-lite/relay"
)

// undoTimeout bounds undoing one fault (a restart waits for readiness).
const undoTimeout = 90 * time.Second

// Config wires a Runner.
type Config struct {
	// Backend runs the cluster. Required.
	Backend backend.Backend
	// Start is the wall-clock instant of run time 0. Required.
	Start time.Time
	// Record receives every fault window when it closes. Required.
	Record func(history.Fault)
	// Seed draws targets. Default 0.
	Seed int64
	// HotPath and HotTenant name the hot key whose owner isolate-owner and
	// kill-owner target. Default /comments/stories/1/comments, acme.
	HotPath, HotTenant string
	// LossPct is the packet loss of "loss", in percent. Default 40.
	LossPct int
	// Delay is the shape "delay" gives one node's links, to its peers and
	// to the upstream. Default DefaultDelay().
	Delay relay.Shape
	// RejoinWait bounds how long a rolling restart waits for a restarted
	// node to rejoin (every node alive everywhere, one leader, every node
	// a voter) before it stops the roll. Default 30s.
	RejoinWait time.Duration
	// MinGap is the least healthy time kept between a window's actual end
	// and the next window's start: a window whose undo ran late (a slow
	// restart, a long roll) pushes the next one back. Default 10s, the
	// schedule's MinGap.
	MinGap time.Duration
	// Log receives every injection and undo. Default nil: discarded.
	Log *slog.Logger
}

// DefaultDelay is the "delay" fault's shape: 300 ms ± 100 ms each way,
// 256 KiB/s. A round trip on a slow link (400–800 ms) is below the
// chaos routes' 2 s slow_call and 5 s forward_timeout, so the fault slows
// heartbeats, forwards, replication and the slow node's upstream calls
// without turning into the outage the partition kinds already are.
func DefaultDelay() relay.Shape {
	return relay.Shape{Latency: 300 * time.Millisecond, Jitter: 100 * time.Millisecond, Bandwidth: 256 << 10}
}

// Runner walks a schedule. Run and HealAll are called from one goroutine.
type Runner struct {
	cfg    Config
	b      backend.Backend
	rng    *rand.Rand
	http   *http.Client
	log    *slog.Logger
	killed map[string]bool
	paused map[string]bool
}

// New builds a Runner; it does no I/O.
func New(cfg Config) *Runner {
	if cfg.HotPath == "" {
		cfg.HotPath, cfg.HotTenant = "/comments/stories/1/comments", "acme"
	}
	if cfg.LossPct == 0 {
		cfg.LossPct = 40
	}
	if cfg.Delay.IsZero() {
		cfg.Delay = DefaultDelay()
	}
	if cfg.RejoinWait == 0 {
		cfg.RejoinWait = 30 * time.Second
	}
	if cfg.MinGap == 0 {
		cfg.MinGap = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, b: cfg.Backend, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x746172)),
		http: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}, log: cfg.Log, killed: map[string]bool{}, paused: map[string]bool{}}
}

// now is the run time.
func (r *Runner) now() int64 { return time.Since(r.cfg.Start).Nanoseconds() }

// Run executes every window in order until ctx is done. A window cut short
// by ctx is still undone and recorded. A window starts at least MinGap
// after the previous one really ended.
func (r *Runner) Run(ctx context.Context, windows []Window) {
	var ended time.Duration // the previous window's actual end; 0 before the first
	for _, w := range windows {
		if ended > 0 && ended+r.cfg.MinGap > w.Start {
			r.log.Info("window pushed back", "kind", w.Kind, "scheduled", w.Start, "by", ended+r.cfg.MinGap-w.Start)
			w.Start = ended + r.cfg.MinGap
		}
		if !r.sleepUntil(ctx, w.Start) {
			return
		}
		r.runWindow(ctx, w)
		ended = time.Duration(r.now())
	}
}

// sleepUntil waits until run time at; false when ctx ended first.
func (r *Runner) sleepUntil(ctx context.Context, at time.Duration) bool {
	d := time.Until(r.cfg.Start.Add(at))
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// active is one injected fault and how to undo it.
type active struct {
	fault history.Fault
	undo  func(context.Context) error
}

// runWindow injects w's fault(s), waits for the window's end and undoes
// them, latest first. A rolling restart is not undone: its window is the
// roll itself, however long it takes.
func (r *Runner) runWindow(ctx context.Context, w Window) {
	switch w.Kind {
	case UpstreamDown, UpstreamDownKillOwner, UpstreamDownRollingRestart:
		r.breakerPhase(ctx, w)
	case RollingRestart:
		r.finish(r.roll(ctx))
	default:
		a := r.inject(ctx, w.Kind)
		r.sleepUntil(ctx, w.End())
		r.finish(a)
	}
}

// breakerPhase runs an upstream outage, which must trip the breaker
// everywhere; the composite kinds then kill the hot key's owner, or roll
// the cluster, a third of the way in.
func (r *Runner) breakerPhase(ctx context.Context, w Window) {
	at := w.End()
	if w.Kind != UpstreamDown {
		at = w.Start + w.Length/3
	}
	down := r.inject(ctx, UpstreamDown)
	if down.fault.Skipped == "" {
		down.fault.Note = join(down.fault.Note, r.watchTrip(ctx, at))
	}
	if at < w.End() && r.sleepUntil(ctx, at) {
		switch w.Kind {
		case UpstreamDownKillOwner:
			kill := r.inject(ctx, KillOwner)
			r.sleepUntil(ctx, w.End())
			r.finish(kill)
		case UpstreamDownRollingRestart:
			r.finish(r.roll(ctx))
		}
	}
	r.sleepUntil(ctx, w.End())
	r.finish(down)
}

// finish undoes a and records its window.
func (r *Runner) finish(a active) {
	if a.undo != nil {
		uctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
		err := a.undo(uctx)
		cancel()
		if err != nil {
			a.fault.Note = join(a.fault.Note, "undo: "+err.Error())
			r.log.Error("undo fault", "kind", a.fault.Kind, "err", err)
		}
	}
	a.fault.End = r.now()
	if a.fault.Skipped != "" {
		a.fault.End = a.fault.Start
	}
	r.log.Info("fault window closed", "kind", a.fault.Kind, "targets", a.fault.Targets, "skipped", a.fault.Skipped)
	r.cfg.Record(a.fault)
}

func join(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// inject starts one fault kind now. A failure to inject is recorded as a
// skipped window with the reason.
func (r *Runner) inject(ctx context.Context, kind string) active {
	a := active{fault: history.Fault{Kind: kind, Start: r.now()}}
	undo, err := r.apply(ctx, &a.fault)
	switch {
	case errors.Is(err, backend.ErrUnsupported):
		a.fault.Skipped = "unsupported here: " + err.Error()
	case err != nil:
		a.fault.Skipped = "could not inject: " + err.Error()
	default:
		a.undo = undo
	}
	if err != nil && !errors.Is(err, backend.ErrUnsupported) && undo != nil {
		// A half-applied fault (e.g. a partition that failed on one node)
		// is still undone.
		a.undo = undo
	}
	r.log.Info("fault injected", "kind", kind, "targets", a.fault.Targets, "note", a.fault.Note, "err", err)
	return a
}

// apply dispatches on the kind and fills f's targets and groups.
func (r *Runner) apply(ctx context.Context, f *history.Fault) (func(context.Context) error, error) {
	switch f.Kind {
	case IsolateNode, IsolateLeader, IsolateOwner, Halves, MajoritiesRing, Bridge:
		return r.partition(ctx, f)
	case Kill, KillLeader, KillMinority, KillOwner:
		return r.kill(ctx, f)
	case RestartAll, KillAll:
		return r.stopAll(ctx, f)
	case Pause:
		return r.pause(f)
	case Loss, Delay:
		return r.degrade(f)
	case UpstreamDown, UpstreamSlow, Upstream5xx, Upstream429, UpstreamReset:
		return r.upstream(ctx, f)
	}
	return nil, fmt.Errorf("%w: kind %q", ErrBadSpec, f.Kind)
}

// upstreamFault is the demo upstream's /-/faults body for a kind.
func (r *Runner) upstreamFault(kind string) map[string]any {
	switch kind {
	case UpstreamSlow:
		return map[string]any{"mode": "slow", "delay": (r.b.Routes().SlowCall + time.Second).String()}
	case Upstream5xx:
		return map[string]any{"mode": "error"}
	case Upstream429:
		return map[string]any{"mode": "ratelimit", "retry_after": 2}
	case UpstreamReset:
		return map[string]any{"mode": "reset"}
	}
	return map[string]any{"mode": "down"}
}

func (r *Runner) upstream(ctx context.Context, f *history.Fault) (func(context.Context) error, error) {
	body := r.upstreamFault(f.Kind)
	f.Note = fmt.Sprintf("fault %v", body)
	if err := r.upstreamCall(ctx, http.MethodPost, body); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return r.upstreamCall(ctx, http.MethodDelete, nil) }, nil
}

// upstreamCall sets (POST) or heals (DELETE) the demo upstream's fault.
func (r *Runner) upstreamCall(ctx context.Context, method string, body any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), method, r.b.UpstreamURL()+"/-/faults", rd)
	if err != nil {
		return err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return fmt.Errorf("upstream %s /-/faults: %w", method, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upstream %s /-/faults: status %d: %s", method, resp.StatusCode, msg)
	}
	return nil
}

// HealAll undoes everything the Runner may have left behind: partitions
// and loss, paused and killed nodes, the upstream fault. It tries every
// step and joins the errors.
func (r *Runner) HealAll(ctx context.Context) error {
	errs := []error{r.b.Heal(), r.upstreamCall(ctx, http.MethodDelete, nil)}
	for n := range r.paused {
		errs = append(errs, r.b.Resume(n))
		delete(r.paused, n)
	}
	for n := range r.killed {
		errs = append(errs, r.b.Restart(ctx, n))
		delete(r.killed, n)
	}
	return errors.Join(errs...)
}

// getJSON GETs a node admin URL into v.
func (r *Runner) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// ownerQuery is the /-/cluster/owner URL for the hot key on node n.
func (r *Runner) ownerQuery(n backend.Node) string {
	return n.URL + "/-/cluster/owner?path=" + url.QueryEscape(r.cfg.HotPath) + "&tenant=" + url.QueryEscape(r.cfg.HotTenant)
}

// Close releases the Runner's idle connections.
func (r *Runner) Close() { r.http.CloseIdleConnections() }
