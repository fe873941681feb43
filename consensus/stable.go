package consensus

import (
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// closingStable is the StableStore Raft writes its term and vote to, made
// safe to close under the one Raft path that outlives Raft.Shutdown: a
// heartbeat the TCP transport handed to Raft's fast path
// (processHeartbeat, on the transport's goroutine) just before shutdown
// may still save a newer term, and Raft panics when that save fails
// ("failed to save current term: database not open"). Close waits for a
// write in progress; a write after it is dropped and a read fails. Dropping
// is safe: the node is stopping, and a term it only heard of (it cast no
// vote in it, votes are written by the main loop, which has stopped)
// cannot let two leaders share a term (raft §5.2: every elected leader's
// majority persisted its votes).
type closingStable struct {
	mu     sync.RWMutex
	closed bool
	store  raft.StableStore
	closer io.Closer
}

func (c *closingStable) Set(key, val []byte) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil
	}
	return c.store.Set(key, val)
}

func (c *closingStable) Get(key []byte) ([]byte, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrClosed
	}
	return c.store.Get(key)
}

func (c *closingStable) SetUint64(key []byte, val uint64) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil
	}
	return c.store.SetUint64(key, val)
}

func (c *closingStable) GetUint64(key []byte) (uint64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, ErrClosed
	}
	return c.store.GetUint64(key)
}

// Close waits for reads and writes in progress and closes the store.
func (c *closingStable) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.closer.Close()
}
