package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/gctune"
	"github.com/levee/levee/memlimit"
	"github.com/levee/levee/node"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	return runTo(args, getenv, os.Stdout, stderr)
}

// runTo is run with the standard output injected (tests read it): a
// command when the first argument names one, else a node.
func runTo(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	e := cliEnv{getenv: getenv, stdout: stdout, stderr: stderr}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if c, ok := findCommand(args[0]); ok {
			return c.run(args[1:], e)
		}
		return unknownCommand(args[0], e)
	}
	cfg, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "levee: %v\n", err)
		return 2
	}
	level := new(slog.LevelVar)
	level.Set(levelOf(cfg, getenv))
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	if stopGC := applyGC(cfg, getenv, log); stopGC != nil {
		defer stopGC()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, cfg, log, node.Options{
		Logger:     log,
		LoadConfig: func() (*config.Config, error) { return loadConfig(args, getenv, io.Discard) },
		OnReload:   func(next *config.Config) { level.Set(levelOf(next, getenv)) },
	})
}

// applyGC sets the collector from node.gc_percent and node.memory_limit
// for the life of the process (a reload does not change them). GOGC and
// GOMEMLIMIT, which the runtime read at start, win when set: they are the
// operator's usual dials (go.dev/doc/gc-guide).
// A positive gc_percent is kept by a gctune.Tuner, which raises it while
// the heap is small so that a collection waits for at least
// gctune.DefaultFloor of allocation; the returned stop ends that (nil
// when no Tuner runs).
func applyGC(cfg *config.Config, getenv func(string) string, log *slog.Logger) (stop func()) {
	percent, limit := "GOGC", "GOMEMLIMIT"
	if getenv("GOGC") == "" {
		p := cfg.Node.EffectiveGCPercent()
		debug.SetGCPercent(p)
		percent = strconv.Itoa(p)
		if p > 0 {
			t := gctune.New(p, gctune.DefaultFloor)
			t.Start()
			stop = t.Stop
		}
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(cfg.EffectiveMemoryLimit())
		limit = strconv.FormatInt(cfg.EffectiveMemoryLimit(), 10)
	}
	attrs := []any{"gc_percent", percent, "memory_limit", limit}
	if stop != nil {
		attrs = append(attrs, "min_room", gctune.DefaultFloor)
	}
	log.Info("garbage collector", attrs...)
	return stop
}

// levelOf is the log level: LEVEE_LOG_LEVEL when set, else node.log_level.
func levelOf(cfg *config.Config, getenv func(string) string) slog.Level {
	if v := getenv("LEVEE_LOG_LEVEL"); v != "" {
		return logLevel(v)
	}
	return logLevel(cfg.Node.LogLevel)
}

// serve runs a node until ctx ends, then shuts it down in order. SIGHUP
// reloads the config (node.Reload): what it cannot apply is logged and
// the running config kept.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, opts node.Options) int {
	n, err := node.New(cfg, opts)
	if err != nil {
		log.Error("cannot build node", "err", err)
		return 1
	}
	// SIGHUP is caught before Start: the app port serves before Start
	// returns (a single node's queue log, a cluster's join, come after
	// it), and a SIGHUP in between would otherwise kill the process, its
	// default action. One that arrives during Start reloads right after.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := n.Start(ctx); err != nil {
		log.Error("cannot start node", "err", err)
		n.Close()
		return 1
	}
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-n.Left(): // POST /-/leave gave up the Raft seat: stop
			break wait
		case <-hup:
			if err := n.ReloadFromSource(); err != nil {
				log.Error("SIGHUP: config not reloaded; the running one stays", "err", err)
			}
		}
	}
	log.Info("shutting down", "node", cfg.Node.Name)
	if err := n.Close(); err != nil {
		log.Error("unclean shutdown", "err", err)
		return 1
	}
	return 0
}

// loadConfig reads -config (or LEVEE_CONFIG), then applies LEVEE_* env
// overrides, then flags, then validates.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (*config.Config, error) {
	fs := flag.NewFlagSet("levee", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\nFlags of a node:\n", topUsage())
		fs.PrintDefaults()
	}
	return loadConfigWith(fs, args, getenv, nil)
}

// loadConfigWith is loadConfig on a given flag set, with extra flags of a
// subcommand registered by extra (nil: none).
func loadConfigWith(fs *flag.FlagSet, args []string, getenv func(string) string, extra func(*flag.FlagSet)) (*config.Config, error) {
	if extra != nil {
		extra(fs)
	}
	path := fs.String("config", getenv("LEVEE_CONFIG"), "YAML config file (env LEVEE_CONFIG)")
	overrides := map[string]*string{}
	for _, key := range config.SettableKeys() {
		overrides[key] = fs.String(key, "", fmt.Sprintf("override %s (env %s)", key, envName(key)))
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (did you mean -config %s?)", fs.Arg(0), fs.Arg(0))
	}
	if *path == "" {
		return nil, errors.New("no config file: run levee -config FILE (or set LEVEE_CONFIG)")
	}
	// Flags win over the environment, which wins over the file.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	env := config.EnvOverride(getenv)
	return config.LoadOverriddenIn(*path, func(key string) (string, string, bool) {
		if set[key] {
			return *overrides[key], "-" + key, true
		}
		return env(key)
	}, containerLimit())
}

// containerLimit is the memory limit of the container the node runs in
// (memlimit.Cgroup), 0 for none: the memory limit and a cache.max_bytes
// left at its default follow it (config.FitMemory). A reload reads it
// again, and finds the same.
func containerLimit() int64 {
	limit, _ := memlimit.Cgroup(os.DirFS("/"))
	return limit
}

// envName turns node.http into LEVEE_NODE_HTTP.
func envName(key string) string { return config.EnvName(key) }

func logLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

const healthUsage = `usage: levee health [-url URL] [-timeout 3s]

The container healthcheck: asks URL (default
http://127.0.0.1:8080/-/readyz) and succeeds when it answers 200.

  -url URL      readiness URL to check
  -timeout 3s   how long to wait for an answer

Exit codes: 0 ready, 1 anything else (not ready, or no answer: a
healthcheck knows only healthy and unhealthy), 2 usage.
`

// healthCmd is the container healthcheck: exit 0 when the node answers ready.
func healthCmd(args []string, e cliEnv) int {
	fs := flag.NewFlagSet("levee health", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, healthUsage) }
	url := fs.String("url", "http://127.0.0.1:8080/-/readyz", "readiness URL to check")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for an answer")
	if err := fs.Parse(args); err != nil {
		return usageCode(err)
	}
	resp, err := newHTTPClient(*timeout).Get(*url)
	if err != nil {
		fmt.Fprintf(e.stderr, "levee health: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(e.stderr, "levee health: %s answered %s\n", *url, resp.Status)
		return 1
	}
	return 0
}
