package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

// The job queue's HTTP contract, as the harness uses it.
const (
	headerPrefer = "Prefer"
	respondAsync = "respond-async"
	headerIdem   = "Idempotency-Key"
	jobsPath     = "/-/jobs/"
)

// Job states that end a job's life (until an operator replays it).
const (
	JobDone = "done"
	JobDead = "dead"
)

// The drain's timings: the period of its rounds of GET /-/jobs/{id}, and
// the bound on asking every node about the jobs still pending at its end.
const (
	drainEvery      = 500 * time.Millisecond
	lastViewsWithin = 30 * time.Second
)

// enqueuer is one sequential process of the queue workload.
type enqueuer struct {
	id  int
	rng *rand.Rand
	n   int // jobs sent so far
}

// runEnqueuers starts the enqueuers on wg. Their ids and random streams
// come after the session bursts' (processes()), so the readers' and the
// sessions' seeded choices are unchanged by them.
func (c *Clients) runEnqueuers(ctx context.Context, wg *sync.WaitGroup) {
	for i := range c.cfg.Enqueuers {
		id := c.cfg.processes() + 1 + i
		e := &enqueuer{id: id, rng: rand.New(rand.NewPCG(uint64(c.cfg.Seed), uint64(id)))}
		wg.Go(func() { c.enqueueLoop(ctx, e) })
	}
}

// enqueueLoop sends one job per tick; ticks are dropped while busy.
func (c *Clients) enqueueLoop(ctx context.Context, e *enqueuer) {
	t := time.NewTicker(c.cfg.EnqueueEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.enqueueOnce(ctx, e)
		}
	}
}

// enqueueOnce sends one job through a random node, with a client key for
// a share of them, and sends a share of the keyed ones again at once,
// same key and body, through another node.
func (c *Clients) enqueueOnce(ctx context.Context, e *enqueuer) {
	e.n++
	ni := e.rng.IntN(len(c.nodes))
	tenant := c.cfg.Tenants[e.rng.IntN(len(c.cfg.Tenants))]
	key := ""
	if e.rng.Float64() < c.cfg.KeyedJobs {
		key = fmt.Sprintf("jl-%x-%d-%d", uint64(c.cfg.Seed), e.id, e.n)
	}
	repeat := key != "" && e.rng.Float64() < c.cfg.RepeatKeys
	body := fmt.Sprintf(`{"process":%d,"job":%d}`, e.id, e.n)
	base := history.Enqueue{Process: e.id, Tenant: tenant, Path: c.cfg.JobPath, Key: key}
	c.rec.Enqueue(c.enqueue(ctx, c.nodes[ni], base, body))
	if !repeat {
		return
	}
	if len(c.nodes) > 1 {
		ni = (ni + 1 + e.rng.IntN(len(c.nodes)-1)) % len(c.nodes)
	}
	base.Repeat = true
	c.rec.Enqueue(c.enqueue(ctx, c.nodes[ni], base, body))
}

// enqueue POSTs body as a job through n and records the answer.
func (c *Clients) enqueue(ctx context.Context, n backend.Node, e history.Enqueue, body string) history.Enqueue {
	e.Node, e.Type, e.Invoke = n.Name, history.Info, c.clock.Now()
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, n.URL+c.cfg.Prefix+e.Path, strings.NewReader(body))
	if err != nil {
		return c.enqueued(e, err)
	}
	req.Header.Set("X-Tenant", e.Tenant)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerPrefer, respondAsync)
	if e.Key != "" {
		req.Header.Set(headerIdem, e.Key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.enqueued(e, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	e.Status, e.Location, e.RetryAfter = resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Retry-After")
	if err != nil {
		return c.enqueued(e, fmt.Errorf("body: %w", err))
	}
	return c.enqueued(classifyEnqueue(e, data), nil)
}

// enqueued stamps e's completion, with err when there was one.
func (c *Clients) enqueued(e history.Enqueue, err error) history.Enqueue {
	e.Time = c.clock.Now()
	if err != nil {
		e.Error = err.Error()
	}
	return e
}

// classifyEnqueue sets e's type from its status and, for a 202, the job.
// A 202 without a job id is a fail: it names no job to wait for.
func classifyEnqueue(e history.Enqueue, data []byte) history.Enqueue {
	e.Type = history.Fail
	if e.Status != http.StatusAccepted {
		e.Error = strings.TrimSpace(string(data[:min(len(data), 200)]))
		return e
	}
	var v struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.ID == "" {
		e.Error = fmt.Sprintf("202 without a job id: %.200s", data)
		return e
	}
	e.Type, e.ID, e.State = history.OK, v.ID, v.State
	return e
}

// acceptedJobs lists the jobs of the 202s recorded so far, each once,
// with the tenant that sent it, in the order they were accepted.
func acceptedJobs(es []history.Enqueue) []history.Enqueue {
	seen := map[string]bool{}
	var out []history.Enqueue
	for _, e := range es {
		if e.Type == history.OK && !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}

// DrainJobs polls GET /-/jobs/{id} for every job accepted so far, each
// round through the next node, until every one is done or dead or within
// has passed; it records the answer that showed a job finished. A job
// still unfinished at the end is asked of every node once more, and every
// answer is recorded (the checker names them). It returns how many jobs
// did not finish. Call it after Run has returned.
func (c *Clients) DrainJobs(ctx context.Context, within time.Duration) int {
	pending := acceptedJobs(c.rec.Snapshot().Enqueues)
	polls := map[string]int{}
	dctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	defer c.http.CloseIdleConnections()
	for round := 0; len(pending) > 0; round++ {
		pending = c.drainRound(dctx, pending, polls, round)
		if len(pending) == 0 {
			break
		}
		select {
		case <-dctx.Done():
			if ctx.Err() == nil { // not interrupted: say where each job is
				lctx, cancel := context.WithTimeout(ctx, lastViewsWithin)
				c.lastViews(lctx, pending, polls)
				cancel()
			}
			return len(pending)
		case <-time.After(drainEvery):
		}
	}
	return 0
}

// drainRound asks about every pending job once, spreading them over the
// nodes, and returns those not yet finished.
func (c *Clients) drainRound(ctx context.Context, pending []history.Enqueue, polls map[string]int, round int) []history.Enqueue {
	var still []history.Enqueue
	for i, e := range pending {
		if ctx.Err() != nil {
			return append(still, pending[i:]...)
		}
		s := c.jobStatus(ctx, c.nodes[(round+i)%len(c.nodes)], e)
		polls[e.ID]++
		if s.State == JobDone || s.State == JobDead {
			s.Polls = polls[e.ID]
			c.rec.JobStatus(s)
			continue
		}
		if s.Status == http.StatusNotFound && c.goneEverywhere(ctx, e, polls) {
			continue
		}
		still = append(still, e)
	}
	return still
}

// goneEverywhere asks every node about e at once, after one answered
// 404; when every node answers 404 it records their answers and reports
// true: the job was removed (a finished job compacted after
// queue.retention or evicted at queue.max_jobs, else lost; the queue
// checker tells which), and asking again would only fill the drain.
func (c *Clients) goneEverywhere(ctx context.Context, e history.Enqueue, polls map[string]int) bool {
	views := make([]history.JobStatus, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { views[i] = c.jobStatus(ctx, n, e) })
	}
	wg.Wait()
	polls[e.ID] += len(views)
	for _, v := range views {
		if v.Status != http.StatusNotFound {
			return false
		}
	}
	for _, v := range views {
		v.Polls = polls[e.ID]
		c.rec.JobStatus(v)
	}
	return true
}

// lastViews records every node's answer about each job still pending.
func (c *Clients) lastViews(ctx context.Context, pending []history.Enqueue, polls map[string]int) {
	for _, e := range pending {
		for _, n := range c.nodes {
			s := c.jobStatus(ctx, n, e)
			polls[e.ID]++
			s.Polls = polls[e.ID]
			c.rec.JobStatus(s)
		}
	}
}

// jobView is the part of GET /-/jobs/{id} the drain keeps.
type jobView struct {
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error"`
	Response  *struct {
		Status int `json:"status"`
	} `json:"response"`
}

// jobStatus reads job e.ID from n with e's tenant header; on a 404 it
// asks again with the admin token, when there is one.
func (c *Clients) jobStatus(ctx context.Context, n backend.Node, e history.Enqueue) history.JobStatus {
	s := c.getJob(ctx, n, e, "")
	if s.Status == http.StatusNotFound && c.cfg.AdminToken != "" {
		if a := c.getJob(ctx, n, e, c.cfg.AdminToken); a.Status == http.StatusOK {
			a.AdminOnly = true
			return a
		}
	}
	return s
}

func (c *Clients) getJob(ctx context.Context, n backend.Node, e history.Enqueue, admin string) history.JobStatus {
	s := history.JobStatus{Node: n.Name, ID: e.ID}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, n.URL+jobsPath+e.ID, nil)
	if err != nil {
		return c.jobAnswered(s, err)
	}
	req.Header.Set("X-Tenant", e.Tenant)
	if admin != "" {
		req.Header.Set("Authorization", "Bearer "+admin)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.jobAnswered(s, err)
	}
	defer resp.Body.Close()
	s.Status = resp.StatusCode
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil || resp.StatusCode != http.StatusOK {
		return c.jobAnswered(s, err)
	}
	var v jobView
	if err := json.Unmarshal(data, &v); err != nil {
		return c.jobAnswered(s, err)
	}
	s.State, s.Attempts, s.LastError = v.State, v.Attempts, v.LastError
	if v.Response != nil {
		s.Response = v.Response.Status
	}
	return c.jobAnswered(s, nil)
}

// jobAnswered stamps s, with err when there was one.
func (c *Clients) jobAnswered(s history.JobStatus, err error) history.JobStatus {
	s.Time = c.clock.Now()
	if err != nil {
		s.Error = err.Error()
	}
	return s
}
