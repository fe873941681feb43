package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// sample is one client request as the client saw it.
type sample struct {
	// Sent is when the request left, from the run's start.
	Sent time.Duration
	// Status is the answer's status; 0 when none came (timeout,
	// connection error).
	Status int
	// Stale is true when X-Cache said the answer was a stale copy:
	// Levee's STALE, nginx's STALE or UPDATING.
	Stale bool
	// Latency is from the send to the last byte of the body.
	Latency time.Duration
}

// loader is an open-loop client: it sends on a fixed schedule whatever
// the answers do, as app servers under steady traffic would, so a proxy
// that holds requests piles them up instead of slowing the load down.
type loader struct {
	cfg    Config
	client *http.Client

	mu      sync.Mutex
	samples []sample
	wg      sync.WaitGroup
}

func newLoader(cfg Config) *loader {
	tr := &http.Transport{
		// Every held request needs its own connection (HTTP/1.1); keep
		// them all for reuse rather than closing most after each burst.
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &loader{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.Timeout}}
}

// requests is how many requests one run sends.
func (l *loader) requests() int {
	return int(l.cfg.span().Seconds() * float64(l.cfg.Rate))
}

// run sends the whole load from t0 on schedule and waits for every answer.
// Request i leaves at t0 + i/Rate, so a late wake-up does not shift the
// rest of the schedule.
func (l *loader) run(t0 time.Time) {
	rng := rand.New(rand.NewPCG(l.cfg.Seed, l.cfg.Seed))
	for i := range l.requests() {
		at := t0.Add(time.Duration(i) * time.Second / time.Duration(l.cfg.Rate))
		time.Sleep(time.Until(at))
		url := l.cfg.Targets[i%len(l.cfg.Targets)] + fmt.Sprintf(l.cfg.Path, rng.IntN(l.cfg.Keys))
		l.wg.Add(1)
		go l.one(url, t0)
	}
	l.wg.Wait()
	l.client.CloseIdleConnections()
}

// one sends a GET and records what came back.
func (l *loader) one(url string, t0 time.Time) {
	defer l.wg.Done()
	start := time.Now()
	s := sample{Sent: start.Sub(t0)}
	if status, xcache, err := l.get(url); err == nil {
		s.Status = status
		s.Stale = xcache == "STALE" || xcache == "UPDATING"
	}
	s.Latency = time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, s)
}

func (l *loader) get(url string) (status int, xcache string, err error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Tenant", l.cfg.Tenant)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	// The latency includes the body: a proxy that streams a late body is
	// not faster for the client than one that answers late.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, "", err
	}
	return resp.StatusCode, resp.Header.Get("X-Cache"), nil
}

// results returns the samples, after run.
func (l *loader) results() []sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.samples
}
