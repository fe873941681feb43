package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/levee/levee/demoupstream"
)

// shutdownTimeout bounds the wait for in-flight requests on SIGINT/SIGTERM.
const shutdownTimeout = 10 * time.Second

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("subsystem", "demo-upstream")
	if err := run(os.Args[1:], log); err != nil {
		log.Error("exit", "err", err)
		os.Exit(1)
	}
}

// parseFlags maps the command line onto a demoupstream.Config.
func parseFlags(args []string) (string, demoupstream.Config, error) {
	cfg := demoupstream.DefaultConfig()
	fs := flag.NewFlagSet("demo-upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "address to listen on")
	fs.DurationVar(&cfg.ChangeEvery, "change-every", cfg.ChangeEvery, "how often each (tenant, key)'s content changes")
	fs.DurationVar(&cfg.MaxAge, "max-age", cfg.MaxAge, "Cache-Control max-age on resources; 0 sends no Cache-Control")
	fs.IntVar(&cfg.LogSize, "log-size", cfg.LogSize, "number of recent calls kept in the call log")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the flaky fault's RNG")
	fs.DurationVar(&cfg.Latency, "latency", cfg.Latency, "base latency added to every /api/ request")
	if err := fs.Parse(args); err != nil {
		return "", cfg, err
	}
	if fs.NArg() > 0 {
		return "", cfg, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return *listen, cfg, cfg.Validate()
}

func run(args []string, log *slog.Logger) error {
	addr, cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	cfg.Logger = log
	ds, err := demoupstream.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: ds, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "change_every", cfg.ChangeEvery,
		"max_age", cfg.MaxAge, "latency", cfg.Latency, "seed", cfg.Seed)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return shutdown(srv, ds, errc, log)
}

// shutdown closes in order: first cut short the sleeping (slow/latency)
// handlers so they answer 503 at once, then let http.Server drain.
func shutdown(srv *http.Server, ds *demoupstream.Server, errc <-chan error, log *slog.Logger) error {
	log.Info("shutting down")
	_ = ds.Close()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
