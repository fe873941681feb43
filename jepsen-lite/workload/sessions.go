package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/jepsen-lite/history"
)

// sessionProc is one process of the per-user workload: a signed-in user
// (sid set) or a stream of first visits (sid "").
type sessionProc struct {
	id     int
	sid    string // its user's sid cookie; "" for first visits
	tenant string // its user's X-Tenant; first visits take the burst's
	rng    *rand.Rand
	burst  chan string // unbuffered: the burst's tenant, sent only while idle
}

// UserSession is the sid cookie of signed-in process id in a run seeded
// with seed: one user per process, never a sid the demo upstream mints
// ("s…").
func UserSession(id int, seed int64) string {
	return fmt.Sprintf("user%d-%x", id, uint64(seed))
}

// sessionProcs builds the signed-in processes, then the first visitors;
// their ids follow the readers'.
func (c *Clients) sessionProcs() []*sessionProc {
	var out []*sessionProc
	for i := range c.cfg.Sessions + c.cfg.FirstVisits {
		id := c.cfg.Clients + i
		p := &sessionProc{id: id, rng: rand.New(rand.NewPCG(uint64(c.cfg.Seed), uint64(id))), burst: make(chan string)}
		if i < c.cfg.Sessions {
			p.sid, p.tenant = UserSession(id, c.cfg.Seed), c.cfg.Tenants[i%len(c.cfg.Tenants)]
		}
		out = append(out, p)
	}
	return out
}

// runSessions starts the session processes and their burst clock on wg.
func (c *Clients) runSessions(ctx context.Context, wg *sync.WaitGroup) {
	procs := c.sessionProcs()
	if len(procs) == 0 {
		return
	}
	for _, p := range procs {
		wg.Go(func() { c.sessionLoop(ctx, p) })
	}
	wg.Go(func() { c.bursts(ctx, procs) })
}

// bursts wakes every idle session process at once, every SessionEvery.
// The send never blocks: a process still busy with its previous read
// skips the burst (the rate stays bounded under faults), and those that
// take part start within microseconds of each other.
func (c *Clients) bursts(ctx context.Context, procs []*sessionProc) {
	// Its own stream, after the processes' (ids 0 … processes−1).
	rng := rand.New(rand.NewPCG(uint64(c.cfg.Seed), uint64(c.cfg.processes())))
	t := time.NewTicker(c.cfg.SessionEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tenant := c.cfg.Tenants[rng.IntN(len(c.cfg.Tenants))]
		for _, p := range procs {
			select {
			case p.burst <- tenant:
			default:
			}
		}
	}
}

// sessionLoop is one sequential session process: one read per burst.
func (c *Clients) sessionLoop(ctx context.Context, p *sessionProc) {
	for {
		select {
		case <-ctx.Done():
			return
		case tenant := <-p.burst:
			if p.sid != "" {
				tenant = p.tenant
			}
			c.sessionOnce(ctx, p, tenant)
		}
	}
}

// sessionOnce picks a node and records one read of the per-user page.
func (c *Clients) sessionOnce(ctx context.Context, p *sessionProc, tenant string) {
	n := c.nodes[p.rng.IntN(len(c.nodes))]
	op := history.Op{Type: history.Invoke, Process: p.id, Node: n.Name, F: history.FSession, Tenant: tenant,
		Key: c.cfg.SessionPath, Session: p.sid, Time: c.clock.Now()}
	c.rec.Op(op)
	c.rec.Op(c.read(ctx, n.URL+c.cfg.Prefix+c.cfg.SessionPath, op))
}

// sessionCookies returns the sid values the answer's Set-Cookie headers
// set, in order, nil when none.
func sessionCookies(resp *http.Response) []string {
	var out []string
	for _, ck := range resp.Cookies() {
		if ck.Name == demoupstream.SessionCookie {
			out = append(out, ck.Value)
		}
	}
	return out
}

// sessionTags decodes a session page's data; the zero Session when the
// data is not one (the checkers count such bodies).
func sessionTags(data json.RawMessage) demoupstream.Session {
	var s demoupstream.Session
	if len(data) == 0 || json.Unmarshal(data, &s) != nil {
		return demoupstream.Session{}
	}
	return s
}
