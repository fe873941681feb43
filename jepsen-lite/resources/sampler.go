package resources

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

// DefaultEvery is the sampling period the issue asks for.
const DefaultEvery = 10 * time.Second

// maxMetrics bounds a /metrics answer read for go_goroutines.
const maxMetrics = 8 << 20

// ErrConfig wraps every invalid Config.
var ErrConfig = errors.New("resources: bad config")

// PIDs finds a node's running process. The local backend implements it.
type PIDs interface {
	// PID is the process id of node's running process; false when it is
	// not running (killed, stopped, between a stop and its restart).
	PID(node string) (int, bool)
}

// Config wires a Sampler.
type Config struct {
	// Nodes are sampled in order; URL serves /metrics. Required.
	Nodes []backend.Node
	// PIDs finds each node's process. Required.
	PIDs PIDs
	// Now is the run clock, in ns since run start. Required.
	Now func() int64
	// Record receives every sample. Required.
	Record func(history.Resources)
	// Every is the sampling period. Default DefaultEvery.
	Every time.Duration
	// Proc is the proc filesystem's root. Default "/proc".
	Proc string
	// HTTP fetches /metrics. Default a client with a 2 s timeout and no
	// proxy (a paused node answers nothing; the sample records -1).
	HTTP *http.Client
	// Log receives read errors. Default nil: discarded.
	Log *slog.Logger
}

// Sampler samples every node's process every Config.Every.
type Sampler struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg and fills its defaults; it does no I/O.
func New(cfg Config) (*Sampler, error) {
	if len(cfg.Nodes) == 0 || cfg.PIDs == nil || cfg.Now == nil || cfg.Record == nil {
		return nil, fmt.Errorf("%w: Nodes, PIDs, Now and Record are required", ErrConfig)
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Proc == "" {
		cfg.Proc = "/proc"
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sampler{cfg: cfg, log: log}, nil
}

// Run samples at once and then every Config.Every until ctx is done.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample takes one round: every running node, at once, so that a slow
// /metrics does not shift the others' times.
func (s *Sampler) Sample(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range s.cfg.Nodes {
		pid, ok := s.cfg.PIDs.PID(n.Name)
		if !ok {
			continue
		}
		wg.Go(func() {
			if r, ok := s.sample(ctx, n, pid); ok {
				s.cfg.Record(r)
			}
		})
	}
	wg.Wait()
}

// sample reads node n's process pid; false when /proc no longer has it
// (it died between PID and the read).
func (s *Sampler) sample(ctx context.Context, n backend.Node, pid int) (history.Resources, bool) {
	r := history.Resources{Time: s.cfg.Now(), Node: n.Name, PID: pid, Goroutines: -1}
	dir := filepath.Join(s.cfg.Proc, strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		s.log.Debug("read status", "node", n.Name, "pid", pid, "err", err)
		return r, false
	}
	rss, err := parseKB(status, "VmRSS:")
	if err != nil {
		s.log.Debug("read rss", "node", n.Name, "pid", pid, "err", err)
		return r, false
	}
	// The split is informative (kernels before 4.5 lack it): 0 if absent.
	r.RSSAnon, _ = parseKB(status, "RssAnon:")
	r.RSSFile, _ = parseKB(status, "RssFile:")
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		s.log.Debug("read fds", "node", n.Name, "pid", pid, "err", err)
		return r, false
	}
	r.RSS, r.FDs = rss, len(fds)
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && strings.HasPrefix(link, "socket:") {
			r.Sockets++
		}
	}
	if g, err := s.goroutines(ctx, n.URL); err == nil {
		r.Goroutines = g
	} else {
		s.log.Debug("read go_goroutines", "node", n.Name, "err", err)
	}
	return r, true
}

// ErrNoFigure is returned when a file or page lacks the figure sought.
var ErrNoFigure = errors.New("resources: figure not found")

// parseKB is the figure of a /proc/PID/status line such as VmRSS, in
// bytes (the kernel writes it in kB: "VmRSS:\t   12345 kB").
func parseKB(status []byte, key string) (int64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte(key))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("%w: %s line %q", ErrNoFigure, key, bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("%w: %s line %q", ErrNoFigure, key, bytes.TrimSpace(line))
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%w: no %s line", ErrNoFigure, key)
}

// goroutines is go_goroutines from the node's /metrics.
func (s *Sampler) goroutines(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	return parseGoroutines(io.LimitReader(resp.Body, maxMetrics))
}

// parseGoroutines finds the go_goroutines sample in Prometheus text
// format (one unlabelled gauge: "go_goroutines 42").
func parseGoroutines(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("go_goroutines "))
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%w: go_goroutines %q", ErrNoFigure, rest)
		}
		return int(v), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%w: no go_goroutines sample", ErrNoFigure)
}
