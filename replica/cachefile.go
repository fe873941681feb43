package replica

import (
	"iter"
	"log/slog"
	"time"

	"github.com/levee/levee/cachefile"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/store"
)

// CacheFile keeps a node's cache in path between runs (cache.persist):
// the entries all yields are saved every interval (and on a graceful
// stop) in the peer wire form replication already speaks, and loaded back
// through put, the engine's, which refuses what a tombstone covers or a
// newer copy beats.
func CacheFile(path string, every time.Duration, all iter.Seq2[string, *store.Entry], put func(key string, e *store.Entry) bool, log *slog.Logger) *cachefile.Keeper {
	return &cachefile.Keeper{
		Path:  path,
		Every: every,
		Entries: func() iter.Seq[*peer.Entry] {
			return func(yield func(*peer.Entry) bool) {
				for key, e := range all {
					if !yield(ToWire("", key, e)) {
						return
					}
				}
			}
		},
		Put:    func(e *peer.Entry) bool { return put(e.Key, FromWire(e)) },
		Logger: log,
	}
}
