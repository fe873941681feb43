package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// childEnv makes this test binary run as a node (TestMain), so the abuse
// test measures a node in a process of its own; LEVEE_BIN names a built
// binary to run instead (`make build`, then LEVEE_BIN=bin/levee).
const childEnv = "LEVEE_TEST_RUN_NODE"

// TestSlowClientsLeaveTheNodeServing is issue 24's scenario against a
// whole node in its own process, with the default node.* limits: from
// 127.0.0.1, abusers trickle one header byte every 2 s, or send headers
// declaring a body and then the body at a byte every 2 s, re-opening (as
// slowloris does, at their next tick) whatever the node closes, for 20 s.
// Meanwhile 20 misses and 20 hits, each on a new connection from
// 127.0.0.2, must each answer 200 within 2 s, and the node's RSS stay
// under 200 MB.
func TestSlowClientsLeaveTheNodeServing(t *testing.T) {
	for _, tc := range []struct {
		name              string
		trickle, slowBody int
		skipInShort       bool
	}{
		{"1,800 abusers", 1500, 300, false},
		{"10,000 abusers", 8334, 1666, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skipInShort && testing.Short() {
				t.Skip("20 s with 10,000 connections; -short")
			}
			if tc.skipInShort && raceEnabled && os.Getenv("LEVEE_BIN") == "" {
				// The race detector slows node and abusers alike several
				// times over: the answer times it measures are its own.
				t.Skip("10,000 abusers against a race-instrumented node; run `make abuse` (the built binary)")
			}
			raiseFileLimit(t, tc.trickle+tc.slowBody+1000)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Cache-Control", "max-age=120")
				io.WriteString(w, "answer for "+r.URL.Path)
			}))
			defer up.Close()
			node := startNodeProcess(t, up.URL)
			ordinary := ordinaryClient()
			defer ordinary.CloseIdleConnections()
			hot := "http://" + node.addr + "/comments/hot"
			if d, err := get(ordinary, hot); err != nil {
				t.Fatalf("priming the hit: %v (%v)", err, d)
			}

			held := time.Now()
			ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
			defer stop()
			ab := abuse(ctx, node.addr, tc.trickle, tc.slowBody)
			rss := node.sample(ctx, ab)
			time.Sleep(3 * time.Second) // the abusers' first connections are in
			times := ordinaryGets(t, ordinary, node.addr, hot, 16*time.Second)
			<-ctx.Done()
			ab.wait()
			most := <-rss
			maxRSS, open := most[0], most[1]
			closed := node.closedByReason(t, ordinary)

			t.Logf("%s: ordinary GETs (20 misses, 20 hits) p50 %v max %v; abusive connections open at most %d, dialled %d; node RSS max %.1f MB; closed by the limits %v",
				tc.name, quantile(times, 0.5), quantile(times, 1), open, ab.dialled.Load(), float64(maxRSS)/(1<<20), closed)
			// One line a second at most, while the limits act.
			if lines, most := node.limitLines.Load(), int64(time.Since(held)/time.Second)+2; lines == 0 || lines > most {
				t.Errorf("the node logged %d connection-limit lines in %v; want 1 to %d", lines, time.Since(held), most)
			}
			for i, d := range times {
				if d > 2*time.Second {
					t.Errorf("ordinary GET %d took %v (> 2 s)", i, d)
				}
			}
			if raceEnabled && os.Getenv("LEVEE_BIN") == "" {
				t.Logf("race detector: RSS not held to 200 MB")
			} else if maxRSS > 200<<20 {
				t.Errorf("node RSS reached %.1f MB (> 200 MB)", float64(maxRSS)/(1<<20))
			}
		})
	}
}

// raiseFileLimit makes room for n descriptors in this process (Go sets
// the soft limit to the hard one; a hard limit below n skips the test).
func raiseFileLimit(t *testing.T, n int) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	if lim.Cur >= uint64(n) {
		return
	}
	if lim.Max < uint64(n) {
		t.Skipf("RLIMIT_NOFILE hard limit %d < %d", lim.Max, n)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
}

type nodeProcess struct {
	addr string
	pid  int
	// limitLines counts the node's "connection limits" log lines.
	limitLines atomic.Int64
}

// startNodeProcess runs a single node with the default node.* limits in
// front of upstream, and stops it when the test ends; extraEnv are more
// KEY=value pairs for its environment.
func startNodeProcess(t *testing.T, upstream string, extraEnv ...string) *nodeProcess {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "levee.yaml")
	yaml := fmt.Sprintf(`node:
  name: n1
  http: 127.0.0.1:0
  data_dir: %s
routes:
  - name: comments
    prefix: /comments/
    upstream: %s/api/
    cache:
      fresh: 2m
`, filepath.Join(dir, "data"), upstream)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, env := os.Args[0], append(os.Environ(), childEnv+"=1")
	if b := os.Getenv("LEVEE_BIN"); b != "" {
		bin, env = b, os.Environ()
	}
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Env = append(env, extraEnv...)
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &nodeProcess{}
	addr := make(chan string, 1)
	logged := make(chan struct{})
	go func() { // reads the node's log to its end: "node started" names the port
		defer close(logged)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var line struct{ Msg, HTTP string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "node started" {
				addr <- line.HTTP
			}
			if strings.Contains(sc.Text(), "connection limits") {
				if n.limitLines.Add(1) <= 2 {
					t.Log("node: " + sc.Text())
				}
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-logged
		cmd.Wait()
	})
	select {
	case a := <-addr:
		n.addr, n.pid = a, cmd.Process.Pid
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not start within 30 s")
		return nil
	}
}

// sample reads the node's VmRSS and the abusers' open connections every
// 250 ms until ctx ends, then sends the largest of each.
func (n *nodeProcess) sample(ctx context.Context, ab *abusers) <-chan [2]int64 {
	out := make(chan [2]int64, 1)
	go func() {
		var rss, held int64
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			rss, held = max(rss, n.rss()), max(held, ab.held.Load())
			select {
			case <-ctx.Done():
				out <- [2]int64{rss, held}
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

func (n *nodeProcess) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// closedByReason reads levee_http_connections_closed_total from the
// node's /metrics ("" when it has no such series: the old node).
func (n *nodeProcess) closedByReason(t *testing.T, c *http.Client) string {
	t.Helper()
	resp, err := c.Get("http://" + n.addr + "/metrics")
	if err != nil {
		return "(metrics: " + err.Error() + ")"
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "levee_http_connections_closed_total{") && !strings.HasSuffix(l, " 0") {
			out = append(out, strings.TrimPrefix(l, "levee_http_connections_closed_total"))
		}
	}
	return strings.Join(out, " ")
}

// ordinaryClient opens a new connection from 127.0.0.2 for every request.
func ordinaryClient() *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// get answers how long a GET took, and an error unless it answered 200
// (naming how long its connect took: a SYN the kernel dropped, its
// listen queue full, costs a second).
func get(c *http.Client, url string) (time.Duration, error) {
	start := time.Now()
	var connected time.Duration
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		ConnectDone: func(string, string, error) { connected = time.Since(start) },
	}), http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	defer func() {
		if d := time.Since(start); d > 2*time.Second {
			log.Printf("GET %s: %v, connected after %v", url, d, connected)
		}
	}()
	if err != nil {
		return time.Since(start), err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return d, err
}

// ordinaryGets sends 20 misses and 20 hits, alternating, spread over
// within, each on its own goroutine; a failed one reports within's worth.
func ordinaryGets(t *testing.T, c *http.Client, addr, hot string, within time.Duration) []time.Duration {
	t.Helper()
	times := make([]time.Duration, 40)
	var wg sync.WaitGroup
	for i := range times {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * within / 40)
			url := hot
			if i%2 == 0 {
				url = fmt.Sprintf("http://%s/comments/miss-%d-%d", addr, i, time.Now().UnixNano())
			}
			d, err := get(c, url)
			if err != nil {
				t.Errorf("ordinary GET %d %s: %v after %v", i, url, err, d)
				d = max(d, within)
			}
			times[i] = d
		})
	}
	wg.Wait()
	return times
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// abusers are slowloris connections from 127.0.0.1 to the node.
type abusers struct {
	held, dialled atomic.Int64
	wg            sync.WaitGroup
}

func (a *abusers) wait() { a.wg.Wait() }

// abuse starts trickle + slowBody abusers until ctx ends: each sends its
// next byte every 2 s (from a random phase) and, finding its connection
// closed, opens a new one at its next tick, as slowloris.py does.
func abuse(ctx context.Context, addr string, trickle, slowBody int) *abusers {
	a := &abusers{}
	const (
		header = "GET /comments/slow HTTP/1.1\r\nHost: levee\r\nX-Slow: "
		body   = "POST /comments/slow HTTP/1.1\r\nHost: levee\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
	)
	for i := range trickle + slowBody {
		first := header
		if i >= trickle {
			first = body
		}
		a.wg.Go(func() { a.one(ctx, addr, first) })
	}
	return a
}

func (a *abusers) one(ctx context.Context, addr, first string) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: time.Second}
	tick := time.NewTimer(rand.N(2 * time.Second))
	defer tick.Stop()
	var c net.Conn
	defer func() {
		if c != nil {
			c.Close()
			a.held.Add(-1)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		tick.Reset(2 * time.Second)
		if c != nil {
			if _, err := c.Write([]byte("a")); err == nil {
				continue
			}
			c.Close()
			c = nil
			a.held.Add(-1)
		}
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			continue
		}
		a.dialled.Add(1)
		if _, err := io.WriteString(nc, first); err != nil {
			nc.Close()
			continue
		}
		c = nc
		a.held.Add(1)
	}
}

// TestTwoThousandKeepAliveConnectionsFromOneAddressReachTheNode: app
// servers behind one NAT address open 2,000 keep-alive connections to a
// node process at once, with the default limits; each is served twice
// and none is refused or closed in between.
func TestTwoThousandKeepAliveConnectionsFromOneAddressReachTheNode(t *testing.T) {
	const n = 2000
	raiseFileLimit(t, 2*n+1000)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=120")
		io.WriteString(w, "answer for "+r.URL.Path)
	}))
	defer up.Close()
	node := startNodeProcess(t, up.URL)
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for round := range 2 {
		var failed atomic.Int64
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if round == 0 {
					c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}).Dial("tcp", node.addr)
					if err != nil {
						t.Errorf("connection %d: %v", i, err)
						failed.Add(1)
						return
					}
					conns[i], readers[i] = c, bufio.NewReader(c)
				}
				if err := keepAliveGet(conns[i], readers[i], i%50); err != nil {
					if failed.Add(1) <= 3 {
						t.Errorf("round %d, connection %d: %v", round, i, err)
					}
				}
			})
		}
		wg.Wait()
		if f := failed.Load(); f > 0 {
			t.Fatalf("round %d: %d of %d connections failed", round, f, n)
		}
	}
}

// keepAliveGet sends a GET on c and reads its 200, within 15 s.
func keepAliveGet(c net.Conn, r *bufio.Reader, key int) error {
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /comments/nat-%d HTTP/1.1\r\nHost: levee\r\n\r\n", key); err != nil {
		return err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
