package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/levee/levee/jepsen-lite/checker"
	"github.com/levee/levee/jepsen-lite/nemesis"
	"github.com/levee/levee/jepsen-lite/report"
	"github.com/levee/levee/jepsen-lite/workload"
)

// Exit statuses.
const (
	exitOK        = 0
	exitViolation = 1
	exitHarness   = 2
)

// options are the parsed flags.
type options struct {
	backend  string
	nodes    int
	duration time.Duration
	quiet    time.Duration
	seed     int64
	out      string
	nemesis  string
	ensure   string
	late     string
	bin      string
	demo     string
	check    string
	rate     float64
	verbose  bool
	// enqueuers is the queue workload's process count (0: no jobs).
	enqueuers int
	// queueRetention and queueMaxJobs are the nodes' queue.retention and
	// queue.max_jobs (0: the product default).
	queueRetention time.Duration
	queueMaxJobs   int
	// A soak: resources sampled every sampleEvery (0: not a soak), judged
	// after soakWarmup in windows of soakWindow.
	sampleEvery, soakWarmup, soakWindow time.Duration
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("jepsen-lite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.backend, "backend", "local", "cluster backend: local (network namespaces, needs root) or docker")
	fs.IntVar(&o.nodes, "nodes", 3, "number of Levee nodes (3 or 5)")
	fs.DurationVar(&o.duration, "duration", 5*time.Minute, "workload duration, faults included (the quiet period comes after)")
	fs.DurationVar(&o.quiet, "quiet", 15*time.Second, "healthy traffic after the final heal, before stopping")
	fs.Int64Var(&o.seed, "seed", 0, "schedule and workload seed (default: time-based, printed)")
	fs.StringVar(&o.out, "out", "", "output dir (default jepsen-lite/out/<timestamp>)")
	fs.StringVar(&o.nemesis, "nemesis", "mixed", "mixed, none, or a comma list of: "+fmt.Sprint(nemesis.AllKinds()))
	fs.StringVar(&o.ensure, "ensure", strings.Join(nemesis.EnsuredKinds(), ","),
		"kinds scheduled at least once when the duration allows (comma list, or none); ignored unless also drawn by -nemesis")
	fs.StringVar(&o.late, "ensure-late", strings.Join(nemesis.LateKinds(), ","),
		"kinds scheduled once late in the run, in the room the -ensure kinds leave (comma list, or none); ignored unless also drawn by -nemesis")
	fs.StringVar(&o.bin, "bin", "bin/levee", "levee binary (local backend)")
	fs.StringVar(&o.demo, "demo", "bin/demo-upstream", "demo-upstream binary (local backend)")
	fs.StringVar(&o.check, "check", "", "re-check a saved run directory without running anything")
	fs.Float64Var(&o.rate, "rate", 30, "total client requests per second")
	fs.BoolVar(&o.verbose, "v", false, "debug logging")
	fs.IntVar(&o.enqueuers, "enqueuers", workload.DefaultConfig().Enqueuers, "processes writing jobs through the durable queue, one every 2 s each (0 = none: the queue checker then judges nothing)")
	fs.DurationVar(&o.queueRetention, "queue-retention", 0, "the nodes' queue.retention: done and dead jobs are kept this long (make soak: 5m, so their memory is at its bound within the warmup); 0 = the product default (24h)")
	fs.IntVar(&o.queueMaxJobs, "queue-max-jobs", 0, "the nodes' queue.max_jobs: past it an enqueue evicts the oldest done jobs; 0 = the product default (10000)")
	fs.DurationVar(&o.sampleEvery, "sample-resources", 0, "soak: sample every node's RSS, goroutines and open fds this often (make soak: 10s) and judge them (checker resources); 0 = off")
	fs.DurationVar(&o.soakWarmup, "soak-warmup", 10*time.Minute, "soak: the time at the start the resources checker leaves out")
	fs.DurationVar(&o.soakWindow, "soak-window", 10*time.Minute, "soak: the span of each median the resources checker compares")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.check == "" && o.nodes != 3 && o.nodes != 5 {
		return o, fmt.Errorf("-nodes must be 3 or 5, got %d", o.nodes)
	}
	if o.check == "" && o.duration < 30*time.Second {
		return o, fmt.Errorf("-duration must be at least 30s, got %v", o.duration)
	}
	if o.sampleEvery > 0 && (o.soakWindow <= 0 || o.soakWarmup < 0 || o.soakWarmup+2*o.soakWindow > o.duration+o.quiet) {
		return o, fmt.Errorf("-sample-resources: the run (%v + %v quiet) must hold -soak-warmup (%v) and two -soak-window (%v)",
			o.duration, o.quiet, o.soakWarmup, o.soakWindow)
	}
	if _, err := nemesis.ParseKinds(o.ensure, o.nodes); o.check == "" && err != nil {
		return o, fmt.Errorf("-ensure: %w", err)
	}
	if _, err := nemesis.ParseKinds(o.late, o.nodes); o.check == "" && err != nil {
		return o, fmt.Errorf("-ensure-late: %w", err)
	}
	if o.enqueuers < 0 {
		return o, fmt.Errorf("-enqueuers must be >= 0, got %d", o.enqueuers)
	}
	// Their upper and lower bounds are the config's: the backend refuses
	// a node config that does not validate, before it starts anything.
	if o.queueRetention < 0 || o.queueMaxJobs < 0 {
		return o, fmt.Errorf("-queue-retention and -queue-max-jobs must be >= 0, got %v and %d", o.queueRetention, o.queueMaxJobs)
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000
	}
	if o.out == "" {
		o.out = filepath.Join("jepsen-lite", "out", time.Now().Format("20060102-150405"))
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "jepsen-lite:", err)
		}
		return exitHarness
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if o.check != "" {
		return recheck(o.check, stdout, log)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runCluster(ctx, o, stdout, log)
}

// recheck loads a saved history and checks it again.
func recheck(dir string, stdout io.Writer, log *slog.Logger) int {
	h, err := report.Load(dir)
	if err != nil {
		log.Error("load history", "dir", dir, "err", err)
		return exitHarness
	}
	return verdict(h, dir, stdout, log)
}

// verdict checks h, prints the table, writes report.html into dir.
func verdict(h *checker.History, dir string, stdout io.Writer, log *slog.Logger) int {
	rs := checker.Check(h, checker.DefaultConfig())
	if err := report.Summary(stdout, rs); err != nil {
		log.Error("summary", "err", err)
	}
	if err := writeReport(dir, h, rs); err != nil {
		log.Error("write report", "err", err)
		return exitHarness
	}
	fmt.Fprintf(stdout, "\nreport: %s\n", filepath.Join(dir, "report.html"))
	if !checker.Passed(rs) {
		return exitViolation
	}
	return exitOK
}

func writeReport(dir string, h *checker.History, rs []checker.Result) error {
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	if err := errors.Join(report.HTML(f, h, rs), f.Close()); err != nil || len(h.Resources) == 0 {
		return err
	}
	svg, err := os.Create(filepath.Join(dir, report.ResourcesPlot))
	if err != nil {
		return err
	}
	return errors.Join(report.ResourcesSVG(svg, h), svg.Close())
}

// randomToken makes a per-run secret.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
