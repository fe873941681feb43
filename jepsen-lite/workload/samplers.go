package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

// maxAdminBody bounds an admin response (the upstream's call log is big).
const maxAdminBody = 256 << 20

// SamplerConfig sets the sampling periods.
type SamplerConfig struct {
	// Route is the breaker route sampled. Default "comments".
	Route string
	// BreakerEvery is the /-/breakers poll period per node. Default 50ms.
	BreakerEvery time.Duration
	// ClusterEvery is the /-/cluster poll period per node. Default 500ms.
	ClusterEvery time.Duration
	// UpstreamEvery is the upstream /-/stats poll period. Default 1s (the
	// call log is sent whole on every poll).
	UpstreamEvery time.Duration
	// Timeout bounds one poll; a paused node answers nothing. Default 1s.
	Timeout time.Duration
}

// DefaultSamplerConfig returns the documented defaults.
func DefaultSamplerConfig() SamplerConfig {
	return SamplerConfig{Route: "comments", BreakerEvery: 50 * time.Millisecond,
		ClusterEvery: 500 * time.Millisecond, UpstreamEvery: time.Second, Timeout: time.Second}
}

// Samplers poll the cluster and the upstream into a Recorder.
type Samplers struct {
	cfg      SamplerConfig
	nodes    []backend.Node
	upstream string
	clock    Clock
	rec      *Recorder
	http     *http.Client
}

// NewSamplers builds the samplers; it does no I/O.
func NewSamplers(cfg SamplerConfig, nodes []backend.Node, upstreamURL string, clock Clock, rec *Recorder) *Samplers {
	return &Samplers{cfg: cfg, nodes: nodes, upstream: upstreamURL, clock: clock, rec: rec,
		http: &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}}
}

// Run polls until ctx is done; it takes one last upstream poll at the end
// so the log's tail is not lost.
func (s *Samplers) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range s.nodes {
		wg.Go(func() { every(ctx, s.cfg.BreakerEvery, func() { s.sampleBreaker(ctx, n) }) })
		wg.Go(func() { every(ctx, s.cfg.ClusterEvery, func() { s.sampleCluster(ctx, n) }) })
	}
	wg.Go(func() { every(ctx, s.cfg.UpstreamEvery, func() { _ = s.PollUpstream(ctx) }) })
	wg.Wait()
	s.http.CloseIdleConnections()
}

func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// getJSON GETs url into v.
func (s *Samplers) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxAdminBody)).Decode(v)
}

// BreakerView is the part of one /-/breakers entry the sampler keeps.
type BreakerView struct {
	Route       string    `json:"route"`
	State       string    `json:"state"`
	Prober      string    `json:"prober"`
	Forced      bool      `json:"forced"`
	Since       time.Time `json:"since"`
	Transitions uint64    `json:"transitions"`
	Raft        *struct {
		Term       uint64 `json:"term"`
		Applied    uint64 `json:"applied_index"`
		CatchingUp bool   `json:"catching_up"`
	} `json:"raft"`
	LocalGuard *struct {
		State string `json:"state"`
	} `json:"local_guard"`
}

func (s *Samplers) sampleBreaker(ctx context.Context, n backend.Node) {
	var views []BreakerView
	smp := history.BreakerSample{Node: n.Name, Route: s.cfg.Route}
	err := s.getJSON(ctx, n.URL+"/-/breakers", &views)
	smp.Time = s.clock.Now()
	if err == nil {
		smp = BreakerSampleOf(smp, views)
	}
	if ctx.Err() == nil {
		s.rec.Breaker(smp)
	}
}

// BreakerSampleOf fills smp from the view of smp.Route, if present.
func BreakerSampleOf(smp history.BreakerSample, views []BreakerView) history.BreakerSample {
	for _, v := range views {
		if v.Route != smp.Route {
			continue
		}
		smp.State, smp.Prober = v.State, v.Prober
		smp.Transitions, smp.Since, smp.Forced = v.Transitions, v.Since, v.Forced
		if v.Raft != nil {
			smp.Term, smp.Index, smp.CatchingUp = v.Raft.Term, v.Raft.Applied, v.Raft.CatchingUp
		}
		if v.LocalGuard != nil {
			smp.Guard = v.LocalGuard.State
		}
	}
	return smp
}

// ClusterView is the part of /-/cluster the sampler keeps.
type ClusterView struct {
	Members []struct {
		Name  string  `json:"name"`
		State string  `json:"state"`
		Share float64 `json:"ring_share"`
	} `json:"members"`
	Raft *struct {
		State  string   `json:"state"`
		Leader string   `json:"leader"`
		Term   uint64   `json:"term"`
		Voters []string `json:"voters"`
	} `json:"raft"`
}

func (s *Samplers) sampleCluster(ctx context.Context, n backend.Node) {
	var v ClusterView
	err := s.getJSON(ctx, n.URL+"/-/cluster", &v)
	m := history.Membership{Time: s.clock.Now(), Node: n.Name}
	if err == nil {
		m = MembershipOf(m, v)
	}
	if ctx.Err() == nil {
		s.rec.Member(m)
	}
}

// MembershipOf fills m from a /-/cluster view and marks it reached.
func MembershipOf(m history.Membership, v ClusterView) history.Membership {
	m.Reached = true
	for _, mem := range v.Members {
		if mem.State == "alive" {
			m.Alive = append(m.Alive, mem.Name)
		}
		if mem.Share > 0 {
			m.Ring = append(m.Ring, mem.Name)
		}
	}
	if v.Raft != nil {
		m.Leader, m.Term, m.RaftState, m.Voters = v.Raft.Leader, v.Raft.Term, v.Raft.State, v.Raft.Voters
	}
	return m
}

// upstreamStats is the part of the demo upstream's /-/stats the sampler
// keeps.
type upstreamStats struct {
	Log []struct {
		Time        time.Time `json:"time"`
		Key         string    `json:"key"`
		Tenant      string    `json:"tenant"`
		Status      int       `json:"status"`
		Conditional bool      `json:"conditional"`
		Fault       string    `json:"fault"`
		Answered    time.Time `json:"answered"`
		RetryAfter  string    `json:"retry_after"`
		RequestID   string    `json:"request_id"`
		Node        string    `json:"node"`
		Method      string    `json:"method"`
		IdemKey     string    `json:"idempotency_key"`
		Session     string    `json:"session"`
		Mint        string    `json:"mint"`
		NewSession  bool      `json:"new_session"`
	} `json:"log"`
}

// PollUpstream reads the upstream's call log once and records the calls
// not seen before, on the run clock.
func (s *Samplers) PollUpstream(ctx context.Context) error {
	var st upstreamStats
	if err := s.getJSON(ctx, s.upstream+"/-/stats", &st); err != nil {
		return err
	}
	for _, c := range st.Log {
		s.rec.Upstream(history.UpstreamCall{Time: s.clock.At(c.Time), Tenant: c.Tenant, Key: c.Key, Status: c.Status,
			Node: c.Node, RequestID: c.RequestID, Conditional: c.Conditional, Fault: c.Fault,
			Answered: s.runTimeOf(c.Answered), RetryAfter: c.RetryAfter,
			Session: c.Session, Mint: c.Mint, NewSession: c.NewSession, Method: c.Method, IdempotencyKey: c.IdemKey})
	}
	return nil
}

// runTimeOf maps t onto the run clock; the zero Time (never answered)
// stays 0.
func (s *Samplers) runTimeOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return s.clock.At(t)
}
