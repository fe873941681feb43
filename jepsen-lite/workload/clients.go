package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

// ErrBadConfig wraps every Config validation error.
var ErrBadConfig = errors.New("workload: bad config")

// maxBody bounds a response body read by a client.
const maxBody = 1 << 20

// Config shapes the client load.
type Config struct {
	// Clients is the number of concurrent sequential processes. Default 8.
	Clients int
	// Rate is the total target request rate over all clients, per second;
	// each client ticks at Rate/Clients and skips ticks while busy.
	// Default 30 (1,800/min, about twice the brief's reference load).
	Rate float64
	// HotKeys is how many story ids get HotFraction of the reads. Default 3.
	HotKeys int
	// ColdKeys is how many other story ids share the rest. Default 60.
	ColdKeys int
	// HotFraction is the share of reads that go to a hot key. Default 0.5.
	HotFraction float64
	// Tenants are the X-Tenant values, picked uniformly. Default acme, globex.
	Tenants []string
	// Prefix is the route prefix on the nodes. Default "/comments/".
	Prefix string
	// Timeout bounds one request; past it the op is info. Default 5s.
	Timeout time.Duration
	// Seed seeds the clients' choices. Default 1.
	Seed int64

	// Sessions is how many further processes read the per-user page
	// (SessionPath) signed in: each sends a sid cookie of its own (a
	// per-process user id) and a fixed X-Tenant. Default 3; 0: none.
	Sessions int
	// FirstVisits is how many further processes read the per-user page
	// without a cookie, every read a new visitor's first visit (they never
	// keep the sid they are given). Default 3; 0: none.
	FirstVisits int
	// SessionEvery is the period of the session bursts: at each, every
	// Sessions and FirstVisits process not still busy with its previous
	// read sends one at the same instant, to the same URL, the first
	// visits all with one X-Tenant drawn for the burst, so that they meet
	// in a cache's in-flight map. Default 1s.
	SessionEvery time.Duration
	// SessionPath is the per-user page below Prefix. Default "session"
	// (the demo upstream's GET /api/session).
	SessionPath string

	// Enqueuers is how many further processes write through Levee's
	// durable job queue: each POSTs to JobPath with Prefer:
	// respond-async and records the answer (a 202's job id, or the
	// refusal). Default 2; 0: none.
	Enqueuers int
	// EnqueueEvery is each enqueuer's period: one job per tick, ticks
	// skipped while busy. Default 2s: 1 job/s in all, against the
	// readers' 30 reads/s, so the queue stays a small share of the load.
	EnqueueEvery time.Duration
	// KeyedJobs is the share of jobs sent with a client Idempotency-Key.
	// Default 0.5.
	KeyedJobs float64
	// RepeatKeys is the share of keyed jobs sent a second time at once,
	// same key and body, through another node: both answers must name
	// one job. Default 0.3.
	RepeatKeys float64
	// JobPath is the path below Prefix the jobs are posted to. Default
	// "jobs" (the demo upstream's POST /api/jobs, which answers a
	// replayed Idempotency-Key with the first answer).
	JobPath string
	// AdminToken is the cluster's admin token: the drain reads a job with
	// it when the job's tenant header gets a 404 (and records that only
	// the admin could). Default "": tenant header only.
	AdminToken string
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Clients: 8, Rate: 30, HotKeys: 3, ColdKeys: 60, HotFraction: 0.5,
		Tenants: []string{"acme", "globex"}, Prefix: "/comments/", Timeout: 5 * time.Second, Seed: 1,
		Sessions: 3, FirstVisits: 3, SessionEvery: time.Second, SessionPath: "session",
		Enqueuers: 2, EnqueueEvery: 2 * time.Second, KeyedJobs: 0.5, RepeatKeys: 0.3, JobPath: "jobs"}
}

// Validate reports the first invalid field, wrapping ErrBadConfig.
func (c Config) Validate() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("%w: clients must be >= 1, got %d", ErrBadConfig, c.Clients)
	case c.Rate <= 0 || c.Rate > 500:
		return fmt.Errorf("%w: rate must be in (0, 500] per second, got %v", ErrBadConfig, c.Rate)
	case c.HotKeys < 1 || c.ColdKeys < 0:
		return fmt.Errorf("%w: need >= 1 hot key and >= 0 cold keys", ErrBadConfig)
	case c.HotFraction < 0 || c.HotFraction > 1:
		return fmt.Errorf("%w: hot fraction must be in [0, 1], got %v", ErrBadConfig, c.HotFraction)
	case len(c.Tenants) == 0:
		return fmt.Errorf("%w: need at least one tenant", ErrBadConfig)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout must be > 0", ErrBadConfig)
	case c.Sessions < 0 || c.FirstVisits < 0:
		return fmt.Errorf("%w: sessions and first visits must be >= 0", ErrBadConfig)
	case c.Sessions+c.FirstVisits > 0 && (c.SessionEvery <= 0 || c.SessionPath == ""):
		return fmt.Errorf("%w: session processes need session_every > 0 and a session path", ErrBadConfig)
	}
	return c.validateJobs()
}

// validateJobs checks the enqueuers' fields.
func (c Config) validateJobs() error {
	switch {
	case c.Enqueuers < 0:
		return fmt.Errorf("%w: enqueuers must be >= 0, got %d", ErrBadConfig, c.Enqueuers)
	case c.Enqueuers > 0 && (c.EnqueueEvery <= 0 || c.JobPath == ""):
		return fmt.Errorf("%w: enqueuers need enqueue_every > 0 and a job path", ErrBadConfig)
	case c.KeyedJobs < 0 || c.KeyedJobs > 1 || c.RepeatKeys < 0 || c.RepeatKeys > 1:
		return fmt.Errorf("%w: keyed jobs and repeat keys must be in [0, 1]", ErrBadConfig)
	}
	return nil
}

// processes is the number of client processes of every kind.
func (c Config) processes() int { return c.Clients + c.Sessions + c.FirstVisits }

// HotKey is the i-th hot key (0-based), as ops record it.
func HotKey(i int) string { return fmt.Sprintf("stories/%d/comments", i+1) }

// coldKey is the i-th cold key; ids start at 1000 so they never clash.
func coldKey(i int) string { return fmt.Sprintf("stories/%d/comments", 1000+i) }

// Body is the part of the demo upstream's tagged envelope a checker needs.
type Body struct {
	Tenant    string    `json:"tenant"`
	Key       string    `json:"key"`
	Version   int64     `json:"version"`
	FetchedAt time.Time `json:"fetched_at"`
	// Data is the resource; a session read takes its tags from it.
	Data json.RawMessage `json:"data"`
}

// Clients reads through the cluster and records every operation.
type Clients struct {
	cfg   Config
	nodes []backend.Node
	clock Clock
	rec   *Recorder
	http  *http.Client
}

// NewClients validates cfg; it does no I/O.
func NewClients(cfg Config, nodes []backend.Node, clock Clock, rec *Recorder) (*Clients, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrBadConfig)
	}
	// No proxy: the harness must reach the nodes directly, whatever the
	// environment says. No cookie jar: a first visitor never keeps the
	// sid it is given, and a user sends only its own.
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: cfg.processes() + cfg.Enqueuers, IdleConnTimeout: 30 * time.Second}
	return &Clients{cfg: cfg, nodes: nodes, clock: clock, rec: rec, http: &http.Client{Transport: tr}}, nil
}

// Run drives every client until ctx is done, then waits for them.
func (c *Clients) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for id := range c.cfg.Clients {
		rng := rand.New(rand.NewPCG(uint64(c.cfg.Seed), uint64(id)))
		wg.Go(func() { c.loop(ctx, id, rng) })
	}
	c.runSessions(ctx, &wg)
	c.runEnqueuers(ctx, &wg)
	wg.Wait()
	c.http.CloseIdleConnections()
}

// loop is one sequential process: one read per tick, ticks dropped while
// a read is in flight, so the rate stays bounded under faults.
func (c *Clients) loop(ctx context.Context, id int, rng *rand.Rand) {
	every := time.Duration(float64(c.cfg.Clients) / c.cfg.Rate * float64(time.Second))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.once(ctx, id, rng)
		}
	}
}

// once picks a node, tenant and key, and records one read.
func (c *Clients) once(ctx context.Context, id int, rng *rand.Rand) {
	n := c.nodes[rng.IntN(len(c.nodes))]
	tenant := c.cfg.Tenants[rng.IntN(len(c.cfg.Tenants))]
	key := HotKey(rng.IntN(c.cfg.HotKeys))
	if c.cfg.ColdKeys > 0 && rng.Float64() >= c.cfg.HotFraction {
		key = coldKey(rng.IntN(c.cfg.ColdKeys))
	}
	op := history.Op{Type: history.Invoke, Process: id, Node: n.Name, F: history.FRead, Tenant: tenant, Key: key, Time: c.clock.Now()}
	c.rec.Op(op)
	done := c.read(ctx, n.URL+c.cfg.Prefix+key, op)
	c.rec.Op(done)
}

// read performs the GET with the invoke op's X-Tenant and sid cookie, and
// turns the answer into the completion op.
func (c *Clients) read(ctx context.Context, url string, op history.Op) history.Op {
	start := op.Time
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	op.Type = history.Info
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		op.Error = err.Error()
		return finish(op, start, c.clock)
	}
	req.Header.Set("X-Tenant", op.Tenant)
	if op.Session != "" {
		req.AddCookie(&http.Cookie{Name: demoupstream.SessionCookie, Value: op.Session})
	}
	resp, err := c.http.Do(req)
	if err != nil {
		op.Error = err.Error()
		return finish(op, start, c.clock)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	op.Status, op.XCache, op.Owner = resp.StatusCode, resp.Header.Get("X-Cache"), resp.Header.Get("X-Levee-Owner")
	op.SetCookies = sessionCookies(resp)
	if err != nil {
		op.Error = "body: " + err.Error()
		return finish(op, start, c.clock)
	}
	return finish(classify(op, data), start, c.clock)
}

// classify sets the op type from the status and, for a 2xx, the body tags.
func classify(op history.Op, data []byte) history.Op {
	if op.Status < 200 || op.Status > 299 {
		op.Type = history.Fail
		return op
	}
	op.Type = history.OK
	b, err := DecodeBody(data)
	if err != nil {
		op.Error = err.Error()
		return op
	}
	op.BodyTenant, op.BodyKey, op.Version, op.FetchedAt = b.Tenant, b.Key, b.Version, b.FetchedAt
	if op.F == history.FSession {
		s := sessionTags(b.Data)
		op.BodySession, op.Mint, op.NewSession = s.SID, s.Mint, s.New
	}
	return op
}

// ErrBadBody is returned for a 2xx body that is not a tagged envelope.
var ErrBadBody = errors.New("workload: body is not a tagged envelope")

// DecodeBody parses the demo upstream's tagged envelope.
func DecodeBody(data []byte) (Body, error) {
	var b Body
	if err := json.Unmarshal(data, &b); err != nil {
		return Body{}, fmt.Errorf("%w: %w", ErrBadBody, err)
	}
	if b.Key == "" || b.FetchedAt.IsZero() {
		return Body{}, fmt.Errorf("%w: missing key or fetched_at", ErrBadBody)
	}
	return b, nil
}

func finish(op history.Op, start int64, clock Clock) history.Op {
	op.Time = clock.Now()
	op.Latency = op.Time - start
	return op
}
