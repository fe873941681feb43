package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "memory:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	keys     int
	conns    int
	settle   time.Duration
	maxBytes string
	levee    string
	upstream string
	httpAddr string
	upAddr   string
	workDir  string
	target   string
	pid      int
	hits     time.Duration
	nodeCPUs string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("memory", flag.ContinueOnError)
	fs.IntVar(&o.keys, "keys", 200000, "distinct ~1 KiB answers to cache")
	fs.IntVar(&o.conns, "conns", 32, "concurrent clients filling the cache")
	fs.DurationVar(&o.settle, "settle", 10*time.Second, "wait after the fill before reading memory")
	fs.StringVar(&o.maxBytes, "max-bytes", "2GiB", "the node's cache.max_bytes")
	fs.StringVar(&o.levee, "levee", "bin/levee", "levee binary (go build -o bin/levee ./cmd/node)")
	fs.StringVar(&o.upstream, "upstream", "bin/demo-upstream", "demo upstream binary")
	fs.StringVar(&o.httpAddr, "http", "127.0.0.1:19201", "the node's node.http")
	fs.StringVar(&o.upAddr, "upstream-addr", "127.0.0.1:19200", "the demo upstream's listen address")
	fs.StringVar(&o.workDir, "dir", "", "work dir for the config, data dir and logs; \"\": a new temp dir")
	fs.StringVar(&o.target, "target", "", "base URL of a node already running (needs -pid); \"\": start one")
	fs.IntVar(&o.pid, "pid", 0, "process id of the node at -target")
	fs.StringVar(&o.nodeCPUs, "node-cpus", "", "pin the node to these CPUs (taskset -c LIST; run this tool on others); \"\": unpinned")
	fs.DurationVar(&o.hits, "hits", 0, "after the measurement, ask for cached keys at random this long and report the node's CPU per hit; 0: none")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case o.keys < 1 || o.keys > maxKeys:
		return o, fmt.Errorf("-keys must be 1..%d, got %d", maxKeys, o.keys)
	case o.conns < 1:
		return o, fmt.Errorf("-conns must be >= 1, got %d", o.conns)
	case (o.target == "") != (o.pid == 0):
		return o, errors.New("-target and -pid go together")
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	base, pid := o.target, o.pid
	if base == "" {
		procs, err := startAll(ctx, o)
		if err != nil {
			return err
		}
		defer procs.stop()
		base, pid = "http://"+o.httpAddr, procs.levee.Process.Pid
	}
	return measure(ctx, o, base, pid, out)
}

// measure fills the node at base, lets it settle and prints one row.
func measure(ctx context.Context, o options, base string, pid int, out io.Writer) error {
	start := time.Now()
	bodies, err := fill(ctx, base, o.keys, o.conns)
	if err != nil {
		return err
	}
	filled := time.Since(start)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.settle):
	}
	rss, err := readStatus(pid, "VmRSS:")
	if err != nil {
		return err
	}
	m, err := scrape(base)
	if err != nil {
		return err
	}
	r := row{keys: o.keys, bodies: bodies, rss: rss, weight: m.bytes, entries: m.entries, fill: filled}
	if err := r.print(out); err != nil || o.hits == 0 {
		return err
	}
	h, err := hitLoad(ctx, base, pid, o.keys, o.conns, o.hits)
	if err != nil {
		return err
	}
	return h.print(out)
}
