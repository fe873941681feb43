package pacing

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Pauser is one node's side of the pacing: PausedUntil is the later of the
// cluster's pause of a host (the committed Table) and this node's own
// (Local); Pause records a pause here at once and proposes it to the
// cluster.
type Pauser struct {
	// Node is this node's name, written into every command. Required.
	Node string
	// Committed is the Table the log builds. Default nil: no cluster.
	Committed *Table
	// Submit proposes an encoded Command through the log and returns once
	// it is committed. Default nil: pauses stay local.
	Submit func(ctx context.Context, data []byte) ([]byte, error)
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Timeout bounds one proposal. Default 2s.
	Timeout time.Duration
	// Logger gets failed proposals. Default: discard.
	Logger *slog.Logger

	once     sync.Once
	local    *Table
	mu       sync.Mutex
	inflight map[string]int64 // host → the latest end asked for while a proposal is in flight
	wg       sync.WaitGroup
}

func (p *Pauser) init() {
	p.once.Do(func() {
		p.local, p.inflight = NewTable(), map[string]int64{}
		if p.Now == nil {
			p.Now = time.Now
		}
		if p.Timeout <= 0 {
			p.Timeout = 2 * time.Second
		}
		if p.Logger == nil {
			p.Logger = slog.New(slog.DiscardHandler)
		}
	})
}

// Hold is PausedUntil by route, for breaker.Config.Hold: hostOf gives the
// host a route calls. Nil when hostOf is nil (nothing to hold).
func (p *Pauser) Hold(hostOf func(route string) (string, bool)) func(route string) time.Time {
	if hostOf == nil {
		return nil
	}
	return func(route string) time.Time {
		if h, ok := hostOf(route); ok {
			return p.PausedUntil(h)
		}
		return time.Time{}
	}
}

// PausedUntil is when host's pause ends, the cluster's or this node's,
// whichever is later; the zero Time when it has none.
func (p *Pauser) PausedUntil(host string) time.Time {
	p.init()
	until := p.local.PausedUntil(host)
	if p.Committed != nil {
		if c := p.Committed.PausedUntil(host); c.After(until) {
			until = c
		}
	}
	return until
}

// Pause pauses host for d from now: on this node at once, and, through
// the log, on every node. It does not wait for the commit. A pause the
// cluster already holds is not proposed again, and one asked for while a
// proposal for the host is in flight is proposed once that one is done,
// the latest end of them all, so a burst of 429s costs two log entries at
// most and every end reaches every node.
func (p *Pauser) Pause(host string, d time.Duration) {
	p.init()
	d = min(d, MaxPause)
	if d <= 0 {
		return
	}
	c := Command{V: CommandVersion, Host: host, Node: p.Node, At: p.Now().UnixNano(), For: int64(d)}
	if c.Validate() != nil {
		return
	}
	p.local.Apply(c)
	if p.Submit == nil || !p.claim(c) {
		return
	}
	p.wg.Go(func() { p.propose(c) })
}

// claim reports whether c must be proposed by a new proposer: the
// committed table does not already hold it, and no proposal for its host
// is in flight. One in flight takes over c's end instead (want), so a
// burst of 429s costs one entry, plus one for a later end that arrived
// meanwhile: every Retry-After's end reaches every node.
func (p *Pauser) claim(c Command) bool {
	if p.Committed != nil && p.Committed.PausedUntil(c.Host).UnixNano() >= c.Until() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if want, ok := p.inflight[c.Host]; ok {
		p.inflight[c.Host] = max(want, c.Until())
		return false
	}
	p.inflight[c.Host] = c.Until()
	return true
}

// propose commits c, then, while a later end was asked for meanwhile and
// the committed table does not hold it yet, that end too.
func (p *Pauser) propose(c Command) {
	for {
		p.submit(c)
		next, ok := p.next(c)
		if !ok {
			return
		}
		c = next
	}
}

// next is the pause still to propose after c: the latest end asked for
// while c was in flight, for what remains of it; false when there is none
// (and the host is no longer in flight).
func (p *Pauser) next(c Command) (Command, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := p.inflight[c.Host]
	committed := int64(0)
	if p.Committed != nil {
		committed = p.Committed.PausedUntil(c.Host).UnixNano()
	}
	now := p.Now().UnixNano()
	if want <= c.Until() || want <= committed || want <= now {
		delete(p.inflight, c.Host)
		return Command{}, false
	}
	c.At, c.For = now, want-now
	return c, c.Validate() == nil
}

func (p *Pauser) submit(c Command) {
	b, err := c.Encode()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
		_, err = p.Submit(ctx, b)
		cancel()
	}
	if err != nil {
		p.Logger.Warn("host pause not committed; held on this node only", "host", c.Host, "for", time.Duration(c.For), "err", err)
	}
}

// Close waits for the proposals in flight (each bounded by Timeout).
func (p *Pauser) Close() { p.wg.Wait() }

// Paused is every host paused now, the cluster's pause or this node's,
// with when it ends.
func (p *Pauser) Paused() map[string]time.Time {
	p.init()
	now := p.Now()
	out := map[string]time.Time{}
	for _, t := range []*Table{p.local, p.Committed} {
		if t == nil {
			continue
		}
		for h, u := range t.Hosts() {
			if u.After(now) && u.After(out[h]) {
				out[h] = u
			}
		}
	}
	return out
}
