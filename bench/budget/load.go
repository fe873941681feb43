package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// series is one run's per-second counts, indexed by the second since the
// run began.
type series struct {
	attempts, lost, good []float64   // at the upstream: every call, its 429s, its 200s
	limit                []float64   // the nodes' levee_host_limit{kind="rate"}, summed
	lat                  [][]float64 // the clients' latencies, ms, by the second they were sent
	quota                []float64   // the quota in force
	ok, sent             []float64   // the clients' 2xx answers, and requests sent
}

func newSeries(n int) *series {
	return &series{attempts: make([]float64, n), lost: make([]float64, n), good: make([]float64, n),
		limit: make([]float64, n), lat: make([][]float64, n), quota: make([]float64, n), ok: make([]float64, n), sent: make([]float64, n)}
}

// counter wraps the demo upstream: it counts each second's API calls and
// their 429s and 200s into the series of the run in progress.
type counter struct {
	next  http.Handler
	mu    sync.Mutex
	cur   *series
	start time.Time
}

func (c *counter) begin(s *series, start time.Time) {
	c.mu.Lock()
	c.cur, c.start = s, start
	c.mu.Unlock()
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		c.next.ServeHTTP(w, r)
		return
	}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	at := time.Now()
	c.next.ServeHTTP(rec, r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return
	}
	if i := int(at.Sub(c.start) / time.Second); i >= 0 && i < len(c.cur.attempts) {
		c.cur.attempts[i]++
		switch rec.status {
		case http.StatusTooManyRequests:
			c.cur.lost[i]++
		case http.StatusOK:
			c.cur.good[i]++
		}
	}
}

// load sends rate GETs a second of distinct keys round-robin over urls
// for the series' length, and samples the nodes' limits each second;
// at each second in changes, set(quota) moves the provider's quota.
func load(ctx context.Context, s *series, urls []string, token, host string, rate float64, changes map[int]float64, set func(float64)) {
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var n atomic.Int64
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	sample := time.NewTicker(time.Second)
	defer sample.Stop()
	q := changes[0]
	for sec := 0; sec < len(s.attempts); {
		select {
		case <-ctx.Done():
			return
		case <-sample.C:
			s.limit[sec] = scrapeLimits(client, urls, token, host)
			s.quota[sec] = q
			sec++
			if v, ok := changes[sec]; ok && sec < len(s.attempts) {
				q = v
				set(v)
			}
		case <-tick.C:
			i := n.Add(1)
			sentAt := sec
			wg.Go(func() {
				u := fmt.Sprintf("%s/stories/%d", urls[int(i)%len(urls)], rand.Int64N(1<<40)) // distinct keys: misses
				t0 := time.Now()
				resp, err := client.Get(u)
				ms := float64(time.Since(t0).Microseconds()) / 1000
				ok := false
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					ok = resp.StatusCode/100 == 2
				}
				mu.Lock()
				defer mu.Unlock()
				s.sent[sentAt]++
				s.lat[sentAt] = append(s.lat[sentAt], ms)
				if ok {
					s.ok[sentAt]++
				}
			})
		}
	}
	wg.Wait()
}

// scrapeLimits sums levee_host_limit{host, kind="rate"} over the nodes.
func scrapeLimits(client *http.Client, urls []string, token, host string) float64 {
	prefix := `levee_host_limit{host="` + host + `",kind="rate"} `
	sum := 0.0
	for _, u := range urls {
		req, _ := http.NewRequest(http.MethodGet, u+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
		resp.Body.Close()
	}
	return sum
}

// csv is the run's per-second counts, one row a second, for reading a
// run's 429s and pauses second by second.
func (s *series) csv() []byte {
	var b strings.Builder
	b.WriteString("second,quota,attempts,429s,200s,cluster_rate_limit,client_sent,client_2xx,client_p99_ms\n")
	for i := range s.attempts {
		fmt.Fprintf(&b, "%d,%g,%g,%g,%g,%.2f,%g,%g,%.1f\n", i, s.quota[i], s.attempts[i], s.lost[i], s.good[i], s.limit[i], s.sent[i], s.ok[i], p99(s, i, i+1))
	}
	return []byte(b.String())
}

// p99 of the latencies sent in seconds [from, to).
func p99(s *series, from, to int) float64 {
	var all []float64
	for _, l := range s.lat[min(from, len(s.lat)):min(max(to, from), len(s.lat))] {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return all[min(len(all)-1, int(0.99*float64(len(all))))]
}

func sum(v []float64, from, to int) float64 {
	t := 0.0
	for _, x := range v[min(from, len(v)):min(max(to, from), len(v))] {
		t += x
	}
	return t
}
