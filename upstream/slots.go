package upstream

import (
	"container/list"
	"context"
	"sync"
)

// slots is a counting semaphore whose size changes while slots are held:
// a node's share of a cluster-wide in-flight cap moves with membership
// (SetShare), and the attempts already in flight must keep their slots
// and give them back as usual. golang.org/x/sync/semaphore cannot be
// resized, hence this one. Waiters are served in arrival order, as there.
type slots struct {
	mu      sync.Mutex
	size    int       // slots that may be held at once
	held    int       // above size after a shrink, until enough are released
	waiters list.List // chan struct{}, closed when granted
}

func newSlots(size int) *slots { return &slots{size: size} }

// acquire takes a slot, waiting its turn until one is free or ctx ends
// (ctx.Err() then, and no slot held).
func (s *slots) acquire(ctx context.Context) error {
	done := ctx.Done()
	s.mu.Lock()
	select {
	case <-done:
		s.mu.Unlock()
		return ctx.Err()
	default:
	}
	if s.held < s.size && s.waiters.Len() == 0 {
		s.held++
		s.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	e := s.waiters.PushBack(ready)
	s.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-done:
		s.giveUp(e, ready)
		return ctx.Err()
	}
}

// tryAcquire takes a slot if one is free and nobody waits for one.
func (s *slots) tryAcquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held < s.size && s.waiters.Len() == 0 {
		s.held++
		return true
	}
	return false
}

// giveUp withdraws a waiter whose ctx ended. The slot may have been
// granted in the meantime: then it goes to the next waiter.
func (s *slots) giveUp(e *list.Element, ready chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-ready:
		s.held--
	default:
		s.waiters.Remove(e)
	}
	s.grant()
}

// release gives back a slot acquire took.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == 0 {
		panic("upstream: slot released that was never acquired")
	}
	s.held--
	s.grant()
}

// resize sets the number of slots. Slots held stay held: after a shrink
// no new one is granted until enough of them are released.
func (s *slots) resize(size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.size = size
	s.grant()
}

// state returns the slots held and the size, for tests and metrics.
func (s *slots) state() (held, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held, s.size
}

// grant hands free slots to the waiters in order; s.mu is held.
func (s *slots) grant() {
	for s.held < s.size && s.waiters.Len() > 0 {
		ready := s.waiters.Remove(s.waiters.Front()).(chan struct{})
		s.held++
		close(ready)
	}
}
