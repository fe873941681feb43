package node

import (
	"iter"
	"path/filepath"

	"github.com/levee/levee/cachefile"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/replica"
)

// cacheFile is where cache.persist keeps the cache between runs.
const cacheFile = "cache.snapshot"

// persistence wires the node's cache to its file (cachefile.Keeper), or
// returns nil when cache.persist is off.
func (n *Node) persistence() *cachefile.Keeper {
	if !n.cfg.Cache.Persist {
		return nil
	}
	return &cachefile.Keeper{
		Path:  filepath.Join(n.cfg.Node.DataDir, cacheFile),
		Every: n.cfg.Cache.PersistInterval.D(),
		Entries: func() iter.Seq[*peer.Entry] {
			return func(yield func(*peer.Entry) bool) {
				for key, e := range n.cache.All() {
					if !yield(replica.ToWire("", key, e)) {
						return
					}
				}
			}
		},
		Put:    func(e *peer.Entry) bool { return n.engine.Put(e.Key, replica.FromWire(e)) },
		Logger: n.log.With("subsystem", "persist"),
	}
}
