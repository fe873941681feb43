package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/levee/levee/demoupstream"
)

// coldCmd sends N requests for one key nobody has asked for, all at once,
// and records their p99 and how many calls the upstream received for
// the key: 1 when the server coalesces them.
func coldCmd(args []string) error {
	fs := flag.NewFlagSet("compare cold", flag.ContinueOnError)
	targets := fs.String("targets", "", "comma-separated base URLs; connections are spread over them in turn (required)")
	name := fs.String("name", "", "the cold key's name, unique per burst (required)")
	upstream := fs.String("upstream", "", "the demo upstream's base URL, for its /-/stats (required)")
	n := fs.Int("n", 500, "concurrent requests, one connection each")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on an answer after this long")
	r := addRowFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *targets == "" || *name == "" || *upstream == "" || *n < 1 {
		return errors.New("compare cold: -targets, -name, -upstream and -n >= 1 are required")
	}
	path, err := coldPath(*name)
	if err != nil {
		return err
	}
	addrs, err := hostPorts(*targets)
	if err != nil {
		return err
	}
	up := strings.TrimSuffix(*upstream, "/")
	if err := postOK(up + "/-/stats/reset"); err != nil {
		return err
	}
	res, err := burst(addrs, path, *n, *timeout)
	if err != nil {
		return err
	}
	calls, err := upstreamCalls(up, path)
	if err != nil {
		return err
	}
	row, err := r.row()
	if err != nil {
		return err
	}
	row.P99, row.Calls, row.Errors = res.p99, calls, res.errors
	return appendRow(r.out, row)
}

// burstResult is what the clients of one burst saw.
type burstResult struct {
	p99    float64 // ms, nearest rank over every request, failed ones included
	errors int     // requests without a 200
}

// burst dials n connections first, so connection setup is not measured,
// then releases one request on each at once. Raw HTTP/1.1 on a net.Conn
// keeps net/http's connection pool from choosing which connections the
// requests share.
func burst(addrs []string, path string, n int, timeout time.Duration) (burstResult, error) {
	conns := make([]net.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := net.DialTimeout("tcp", addrs[i%len(addrs)], 5*time.Second)
		if err != nil {
			return burstResult{}, fmt.Errorf("dial %d of %d: %w", i+1, n, err)
		}
		conns[i] = c
	}
	lat := make([]time.Duration, n)
	ok := make([]bool, n)
	gate := make(chan struct{})
	var ready, done sync.WaitGroup
	for i, c := range conns {
		ready.Add(1)
		done.Go(func() {
			req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: bench-compare\r\n\r\n", path, c.RemoteAddr())
			ready.Done()
			<-gate
			start := time.Now()
			ok[i] = roundTrip(c, req, start.Add(timeout))
			lat[i] = time.Since(start)
		})
	}
	ready.Wait()
	close(gate)
	done.Wait()
	res := burstResult{p99: ms(quantile(slices.Sorted(slices.Values(lat)), 0.99))}
	for _, good := range ok {
		if !good {
			res.errors++
		}
	}
	return res, nil
}

// roundTrip writes req on c and reads the whole answer; true on a 200.
func roundTrip(c net.Conn, req string, deadline time.Time) bool {
	if err := c.SetDeadline(deadline); err != nil {
		return false
	}
	if _, err := io.WriteString(c, req); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK
}

// upstreamCalls counts the calls the demo upstream received for path
// ("": for any path) since its stats were reset, once none is in flight.
func upstreamCalls(base, path string) (int, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var st demoupstream.Stats
		if err := getJSON(client, base+"/-/stats", &st); err != nil {
			return 0, err
		}
		if st.InFlight == 0 || time.Now().After(deadline) {
			if path == "" {
				return st.Total, nil
			}
			calls := 0
			for _, k := range st.ByKey {
				if k.Key == path {
					calls += k.Calls
				}
			}
			return calls, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hostPorts(list string) ([]string, error) {
	var out []string
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("target %q is not a base URL", s)
		}
		out = append(out, u.Host)
	}
	if len(out) == 0 {
		return nil, errors.New("no targets")
	}
	return out, nil
}

func postOK(u string) error {
	resp, err := http.Post(u, "application/json", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", u, resp.Status)
	}
	return nil
}

func getJSON(client *http.Client, u string, into any) error {
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
