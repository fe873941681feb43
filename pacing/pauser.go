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
	inflight map[string]int64 // host → end of the pause being proposed
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
// cluster (or a proposal in flight) already covers is not proposed again,
// so a burst of 429s costs one log entry.
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

// claim reports whether c must be proposed: neither the committed table
// nor a proposal in flight ends within a second of it.
func (p *Pauser) claim(c Command) bool {
	const slack = int64(time.Second)
	if p.Committed != nil && p.Committed.PausedUntil(c.Host).UnixNano() >= c.Until()-slack {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight[c.Host] >= c.Until()-slack {
		return false
	}
	p.inflight[c.Host] = c.Until()
	return true
}

func (p *Pauser) propose(c Command) {
	defer func() {
		p.mu.Lock()
		if p.inflight[c.Host] == c.Until() {
			delete(p.inflight, c.Host)
		}
		p.mu.Unlock()
	}()
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
