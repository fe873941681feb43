package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// readyTimeout bounds the wait for a started process to answer.
const readyTimeout = 30 * time.Second

// procs are the two processes a run starts.
type procs struct {
	upstream, levee *exec.Cmd
}

// startAll starts the demo upstream, then the node, each once it can be
// reached; on error nothing is left running.
func startAll(ctx context.Context, o options) (*procs, error) {
	dir := o.workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "levee-memory-")
		if err != nil {
			return nil, err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &procs{}
	var err error
	// Content changes once a day and max-age is an hour: every answer keeps
	// its size and stays fresh for the whole run.
	p.upstream, err = start(dir, "upstream", o.upstream, "-listen", o.upAddr, "-change-every", "24h", "-max-age", "1h")
	if err == nil {
		err = waitOK(ctx, "http://"+o.upAddr+"/-/healthz")
	}
	if err == nil {
		p.levee, err = startLevee(dir, o)
	}
	if err == nil {
		err = waitOK(ctx, "http://"+o.httpAddr+"/-/readyz")
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("%w (logs in %s)", err, dir)
	}
	return p, nil
}

// startLevee writes the node's config into dir and starts it.
func startLevee(dir string, o options) (*exec.Cmd, error) {
	path := filepath.Join(dir, "levee.yaml")
	if err := os.WriteFile(path, []byte(leveeConfig(dir, o)), 0o600); err != nil {
		return nil, err
	}
	if o.nodeCPUs != "" {
		// taskset execs the node: the pid started is the node's.
		return start(dir, "levee", "taskset", "-c", o.nodeCPUs, o.levee, "-config", path)
	}
	return start(dir, "levee", o.levee, "-config", path)
}

// leveeConfig is a single node keeping /api/ answers an hour, with no
// cache file (loading one would change what is measured) and host caps
// that never hold the fill back.
func leveeConfig(dir string, o options) string {
	up := "http://" + o.upAddr
	return fmt.Sprintf(`node:
  name: mem
  http: %s
  data_dir: %s
cache:
  max_bytes: %s
  persist: false
hosts:
  %s: {inflight: 256, rate: 1000000, burst: 1000000}
routes:
  - name: api
    prefix: /api/
    upstream: %s/api/
    cache: {fresh: 1h, stale: 0s}
`, o.httpAddr, filepath.Join(dir, "data"), o.maxBytes, up, up)
}

// start runs bin with its output in dir/name.log.
func start(dir, name, bin string, args ...string) (*exec.Cmd, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
}

// stop ends the node, then the upstream, each with SIGTERM and a wait.
func (p *procs) stop() {
	for _, c := range []*exec.Cmd{p.levee, p.upstream} {
		if c != nil && c.Process != nil {
			c.Process.Signal(syscall.SIGTERM)
			c.Wait()
		}
	}
}

// waitOK polls url until it answers 200.
func waitOK(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
