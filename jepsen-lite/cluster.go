package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/checker"
	"github.com/levee/levee/jepsen-lite/nemesis"
	"github.com/levee/levee/jepsen-lite/report"
	"github.com/levee/levee/jepsen-lite/resources"
	"github.com/levee/levee/jepsen-lite/workload"
)

// Harness timeouts. jobDrainTimeout bounds the wait for every accepted
// job to end done or dead after the quiet period: a job's retries wait at
// most 0.5+1+2+4+8 s (queue.retry: base 500ms, doubling) before it is
// dead, and a job leased by a node that died is handed out again after
// the harness's 5 s visibility timeout, so a healthy cluster needs far
// less.
const (
	setupTimeout    = 5 * time.Minute
	healTimeout     = 2 * time.Minute
	jobDrainTimeout = 90 * time.Second
)

// runCluster is one full run: setup, workload + samplers + nemesis, final
// heal, quiet period, stop, save, check, report, teardown.
func runCluster(ctx context.Context, o options, stdout io.Writer, log *slog.Logger) int {
	windows, err := plan(o)
	if err != nil {
		log.Error("schedule", "err", err)
		return exitHarness
	}
	fmt.Fprintf(stdout, "jepsen-lite: backend %s, %d nodes, %v + %v quiet, seed %d, out %s\n", o.backend, o.nodes, o.duration, o.quiet, o.seed, o.out)
	printSchedule(stdout, windows)
	routes := backend.DefaultRoutes()
	routes.QueueRetention, routes.QueueMaxJobs = o.queueRetention, o.queueMaxJobs
	cfg := backend.Config{Nodes: o.nodes, Dir: filepath.Join(o.out, "cluster"), Bin: o.bin, Demo: o.demo,
		Secret: randomToken(), Admin: randomToken(), Seed: o.seed, Verbose: o.verbose, Log: log.With("subsystem", "backend")}
	b, err := newBackend(o.backend, cfg, routes)
	if err != nil {
		log.Error("backend", "err", err)
		return exitHarness
	}
	defer teardown(b, log)
	if err := setup(ctx, b); err != nil {
		log.Error("setup", "err", err)
		return exitHarness
	}
	h, interrupted, err := drive(ctx, o, b, cfg.Admin, windows, log)
	if err != nil {
		log.Error("run", "err", err)
		return exitHarness
	}
	if err := report.Save(o.out, h); err != nil {
		log.Error("save history", "err", err)
		return exitHarness
	}
	if interrupted {
		fmt.Fprintf(stdout, "interrupted: partial history saved in %s (re-check with -check)\n", o.out)
		return exitHarness
	}
	return verdict(h, o.out, stdout, log)
}

// plan parses the nemesis kinds to draw from, to ensure and to place late,
// and draws the seeded schedule.
func plan(o options) ([]nemesis.Window, error) {
	kinds, err := nemesis.ParseKinds(o.nemesis, o.nodes)
	if err != nil {
		return nil, fmt.Errorf("-nemesis: %w", err)
	}
	ensure, err := nemesis.ParseKinds(o.ensure, o.nodes)
	if err != nil {
		return nil, fmt.Errorf("-ensure: %w", err)
	}
	late, err := nemesis.ParseKinds(o.late, o.nodes)
	if err != nil {
		return nil, fmt.Errorf("-ensure-late: %w", err)
	}
	scfg := nemesis.DefaultScheduleConfig(o.duration, kinds, o.seed)
	scfg.Nodes, scfg.Ensure, scfg.Late = o.nodes, ensure, late
	return nemesis.Schedule(scfg)
}

// setup starts the cluster within setupTimeout and waits for it to converge.
func setup(ctx context.Context, b backend.Backend) error {
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	err := b.Setup(sctx)
	cancel()
	if err != nil {
		return err
	}
	return waitConverged(ctx, b.Nodes())
}

func printSchedule(w io.Writer, windows []nemesis.Window) {
	for _, win := range windows {
		fmt.Fprintf(w, "  %6.0fs – %6.0fs  %s\n", win.Start.Seconds(), win.End().Seconds(), win.Kind)
	}
}

func teardown(b backend.Backend, log *slog.Logger) {
	if err := b.Teardown(); err != nil {
		log.Error("teardown", "err", err)
	}
}

// drive runs the workload phase and the quiet period, drains the job
// queue, and returns the history. interrupted is true when ctx ended
// early (Ctrl-C). admin is the cluster's admin token.
func drive(ctx context.Context, o options, b backend.Backend, admin string, windows []nemesis.Window, log *slog.Logger) (*checker.History, bool, error) {
	start := time.Now()
	clock := workload.NewClock(start)
	rec := workload.NewRecorder()
	wcfg := workload.DefaultConfig()
	wcfg.Seed, wcfg.Rate, wcfg.AdminToken, wcfg.Enqueuers = o.seed, o.rate, admin, o.enqueuers
	clients, err := workload.NewClients(wcfg, b.Nodes(), clock, rec)
	if err != nil {
		return nil, false, err
	}
	samplers := workload.NewSamplers(workload.DefaultSamplerConfig(), b.Nodes(), b.UpstreamURL(), clock, rec)
	nem := nemesis.New(nemesis.Config{Backend: b, Start: start, Record: rec.Fault, Seed: o.seed,
		HotPath: "/comments/" + workload.HotKey(0), HotTenant: wcfg.Tenants[0], Log: log.With("subsystem", "nemesis")})
	defer nem.Close()

	res, err := resourceSampler(o, b, clock, rec, log)
	if err != nil {
		return nil, false, err
	}

	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { clients.Run(runCtx) })
	wg.Go(func() { samplers.Run(runCtx) })
	if res != nil {
		wg.Go(func() { res.Run(runCtx) })
	}

	nctx, stopNem := context.WithTimeout(ctx, o.duration)
	nem.Run(nctx, windows)
	<-nctx.Done()
	stopNem()
	hctx, cancel := context.WithTimeout(context.Background(), healTimeout)
	if err := nem.HealAll(hctx); err != nil {
		log.Warn("final heal", "err", err)
	}
	cancel()
	log.Info("final heal done; quiet period", "quiet", o.quiet)
	quiet(ctx, o.quiet)
	interrupted := ctx.Err() != nil
	end := clock.Now()
	stopRun()
	wg.Wait()
	if !interrupted {
		drainJobs(ctx, clients, log)
	}
	// After the drain, so that the deliveries it waited for are in.
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := samplers.PollUpstream(pctx); err != nil {
		log.Warn("last upstream poll", "err", err)
	}
	cancel()
	return assemble(o, b, rec, start, end), interrupted, nil
}

// resourceSampler samples every node's RSS, goroutines and fds when
// -sample-resources is set (a soak); nil otherwise. The backend must know
// its nodes' processes (resources.PIDs: the local backend).
func resourceSampler(o options, b backend.Backend, clock workload.Clock, rec *workload.Recorder, log *slog.Logger) (*resources.Sampler, error) {
	if o.sampleEvery <= 0 {
		return nil, nil
	}
	pids, ok := b.(resources.PIDs)
	if !ok {
		return nil, fmt.Errorf("-sample-resources: the %s backend cannot name its nodes' processes (use -backend local)", o.backend)
	}
	return resources.New(resources.Config{Nodes: b.Nodes(), PIDs: pids, Now: clock.Now, Record: rec.Resources,
		Every: o.sampleEvery, Log: log.With("subsystem", "resources")})
}

// drainJobs waits, within jobDrainTimeout, until every job the cluster
// accepted is done or dead; the queue checker judges what it recorded.
func drainJobs(ctx context.Context, clients *workload.Clients, log *slog.Logger) {
	t0 := time.Now()
	if n := clients.DrainJobs(ctx, jobDrainTimeout); n > 0 {
		log.Warn("job drain: jobs neither done nor dead", "pending", n, "waited", jobDrainTimeout)
		return
	}
	log.Info("job drain done", "took", time.Since(t0).Round(time.Millisecond))
}

func quiet(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// assemble builds the recorded run with its metadata.
func assemble(o options, b backend.Backend, rec *workload.Recorder, start time.Time, end int64) *checker.History {
	snap := rec.Snapshot()
	alive := map[string]bool{}
	var names []string
	for _, n := range b.Nodes() {
		names = append(names, n.Name)
		alive[n.Name] = b.Alive(n.Name)
	}
	var soak *checker.Soak
	if o.sampleEvery > 0 {
		soak = &checker.Soak{Every: o.sampleEvery, Warmup: o.soakWarmup, Window: o.soakWindow}
	}
	return &checker.History{
		Meta: checker.Meta{Seed: o.seed, Backend: o.backend, Nemesis: o.nemesis, Nodes: names, Routes: b.Routes(),
			Start: start, End: end, AliveAtEnd: alive, Soak: soak},
		Ops: snap.Ops, Upstream: snap.Upstream, Breakers: snap.Breakers, Members: snap.Members, Faults: snap.Faults,
		Enqueues: snap.Enqueues, JobStates: snap.JobStates, Resources: snap.Resources,
	}
}
