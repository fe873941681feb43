package cachefile

import (
	"context"
	"iter"
	"log/slog"
	"time"

	"github.com/levee/levee/peer"
)

// MinEvery is the shortest periodic save a configuration may ask for
// (cache.persist_interval, which config validates with it): each save
// writes the whole cache, and at 1ns the saves took more than a core
// (measured: 1.1 cores of CPU with an empty cache). Redis's save points
// count whole seconds too.
const MinEvery = time.Second

// Keeper keeps one cache in one file: Load fills the cache at start, Start
// saves it every Every, Stop saves it once more on a graceful stop. It gets
// the functions it needs, not the cache: Entries lists what to save, Put
// stores a loaded entry (reporting whether it was usable).
type Keeper struct {
	// Path is the file. Required.
	Path string
	// Every is how often the cache is saved while running. Default 0: only
	// on a graceful Stop. A configuration sets 0 or at least MinEvery.
	Every time.Duration
	// Entries yields the entries to save. Required.
	Entries func() iter.Seq[*peer.Entry]
	// Put stores a loaded entry and reports whether it was kept. Required.
	Put func(*peer.Entry) bool
	// Logger gets one line per load and save. Default: discard.
	Logger *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
}

// Load fills the cache from Path before the node serves. A missing file is
// nothing to load; a damaged one costs only the entries after the damage.
func (k *Keeper) Load() {
	loaded := 0
	read, err := Load(k.Path, func(e *peer.Entry) {
		if k.Put(e) {
			loaded++
		}
	})
	if err != nil {
		k.logger().Warn("cache file damaged: loaded what came before the damage", "path", k.Path, "read", read, "err", err)
	}
	if read > 0 {
		k.logger().Info("cache loaded from the last run", "path", k.Path, "entries", read, "usable", loaded)
	}
}

// Start saves every Every until Stop.
func (k *Keeper) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	go func() {
		defer close(k.done)
		if k.Every <= 0 {
			return
		}
		t := time.NewTicker(k.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				k.save("periodic")
			}
		}
	}()
}

// Stop ends the timer; with final it saves once more (a graceful stop; a
// kill saves nothing and the last periodic save stands). Before Start it
// does nothing: a node that never loaded its file must not overwrite it.
func (k *Keeper) Stop(final bool) {
	if k.cancel == nil {
		return
	}
	k.cancel()
	<-k.done
	if final {
		k.save("stop")
	}
}

func (k *Keeper) save(why string) {
	start := time.Now()
	n, err := Save(k.Path, k.Entries())
	if err != nil {
		k.logger().Warn("cache not saved", "path", k.Path, "why", why, "err", err)
		return
	}
	k.logger().Info("cache saved", "path", k.Path, "why", why, "entries", n, "took_ms", time.Since(start).Milliseconds())
}

func (k *Keeper) logger() *slog.Logger {
	if k.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return k.Logger
}
