package node

import (
	"context"
	"path/filepath"
	"time"

	"github.com/levee/levee/cachefile"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/replica"
)

// cacheFile is where cache.persist keeps the cache between runs.
const cacheFile = "cache.snapshot"

// persister saves the cache on a timer and on a graceful stop, and loads
// it at start (cachefile explains why a restart needs it). It gets the
// functions it needs, not the node.
type persister struct {
	path  string
	every time.Duration // 0: only on stop
	save  func() (int, error)
	log   func(msg string, args ...any)

	cancel context.CancelFunc
	done   chan struct{}
}

// persistence returns the node's persister, or nil when cache.persist is
// off.
func (n *Node) persistence() *persister {
	if !n.cfg.Cache.Persist {
		return nil
	}
	p := &persister{path: filepath.Join(n.cfg.Node.DataDir, cacheFile), every: n.cfg.Cache.PersistInterval.D(),
		log: n.log.With("subsystem", "persist").Info}
	p.save = func() (int, error) {
		return cachefile.Save(p.path, func(yield func(*peer.Entry) bool) {
			for key, e := range n.cache.All() {
				if !yield(replica.ToWire("", key, e)) {
					return
				}
			}
		})
	}
	return p
}

// load fills the empty cache from the file before the node serves. A
// damaged file costs only the entries after the damage.
func (n *Node) loadCache(p *persister) {
	loaded := 0
	read, err := cachefile.Load(p.path, func(e *peer.Entry) {
		if n.engine.Put(e.Key, replica.FromWire(e)) {
			loaded++
		}
	})
	if err != nil {
		n.log.Warn("cache file damaged: loaded what came before the damage", "path", p.path, "read", read, "err", err)
	}
	if read > 0 {
		n.log.Info("cache loaded from the last run", "path", p.path, "entries", read, "usable", loaded)
	}
}

// start saves every p.every until stop.
func (p *persister) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		if p.every <= 0 {
			return
		}
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.saveNow("periodic")
			}
		}
	}()
}

// stop ends the timer; with final it saves once more (a graceful stop).
// Before start it does nothing: a node that never loaded its file must not
// overwrite it.
func (p *persister) stop(final bool) {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	if final {
		p.saveNow("stop")
	}
}

func (p *persister) saveNow(why string) {
	start := time.Now()
	n, err := p.save()
	if err != nil {
		p.log("cache not saved", "path", p.path, "why", why, "err", err)
		return
	}
	p.log("cache saved", "path", p.path, "why", why, "entries", n, "took_ms", time.Since(start).Milliseconds())
}
