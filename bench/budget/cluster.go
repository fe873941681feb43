package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// cluster is three levee processes started from generated configs.
type cluster struct {
	procs []*exec.Cmd
	urls  []string // http://host:port of each node
	token string
}

// nodeAddr is node i's loopback address (distinct IPs: fixed ports that
// do not collide with a test's 127.0.0.1:0 listeners).
func nodeAddr(i int) string { return fmt.Sprintf("127.0.27.%d", 11+i) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// hostsYAML is the hosts: entry of a scenario for the upstream at origin:
// caps of rate requests a second (burst half of it), adaptive as given.
func hostsYAML(origin string, rate float64, adaptive string) string {
	return fmt.Sprintf("hosts:\n  %q: {inflight: 64, rate: %g, burst: %d%s}\n", origin, rate, max(1, int(rate/2)), adaptive)
}

// startCluster writes the configs into dir and starts the nodes.
func startCluster(levee, dir, upstream, hosts string) (*cluster, error) {
	c := &cluster{token: randomHex(16)}
	secret := randomHex(32)
	var join []string
	for i := range 3 {
		join = append(join, fmt.Sprintf("%q", nodeAddr(i)+":17946"))
	}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		cfg := fmt.Sprintf(`node:
  name: %s
  http: %s:18080
  data_dir: %s
  gossip: %s:17946
  raft: %s:18300
  join: [%s]
  bootstrap_expect: 3
  log_level: info
cluster:
  secret: %q
  admin_token: %q
%sroutes:
  - name: stories
    prefix: /stories/
    upstream: %s/api/stories/
    retry: {budget: 5s}
`, name, nodeAddr(i), filepath.Join(dir, name), nodeAddr(i), nodeAddr(i), strings.Join(join, ", "), secret, c.token, hosts, upstream)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			return nil, err
		}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(levee, "-config", path)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			c.stop()
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		c.procs = append(c.procs, cmd)
		c.urls = append(c.urls, "http://"+nodeAddr(i)+":18080")
	}
	return c, c.waitReady(60 * time.Second)
}

// waitReady polls every node's /-/readyz until all answer 200.
func (c *cluster) waitReady(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for _, u := range c.urls {
		for {
			resp, err := client.Get(u + "/-/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not ready within %v", u, d)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// stop ends the nodes: SIGTERM, then a kill after 15 s.
func (c *cluster) stop() {
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
}
