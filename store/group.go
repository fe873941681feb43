package store

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

var (
	// ErrClosed is returned by [Group.Do] after [Group.Close].
	ErrClosed = errors.New("store: group closed")
	// ErrFetchPanicked is wrapped (by a [*PanicError]) in the error every
	// waiter of a flight gets when the flight's fn panics.
	ErrFetchPanicked = errors.New("store: fetch panicked")
)

// PanicError is the error of a flight whose fn panicked (or called
// runtime.Goexit). It wraps [ErrFetchPanicked] and keeps the stack for the
// log line.
type PanicError struct {
	Value any    // what fn panicked with
	Stack []byte // the panicking goroutine's stack
}

func (p *PanicError) Error() string { return fmt.Sprintf("%v: %v", ErrFetchPanicked, p.Value) }

// Unwrap makes errors.Is(err, ErrFetchPanicked) hold.
func (p *PanicError) Unwrap() error { return ErrFetchPanicked }

// Group coalesces concurrent fetches of one key: the first caller starts
// fn, every caller that arrives for the same key while it runs waits for
// that run's result. Foreground misses ([Group.Do]) and background refreshes
// ([Group.Start]) share one in-flight map, so they never race for a key.
//
// The zero value is ready to use. A Group must not be copied after first
// use. Call [Group.Close] on shutdown.
type Group[T any] struct {
	mu      sync.Mutex
	flights map[string]*flight[T] // guarded by mu; nil until first use
	closed  bool                  // guarded by mu
	ctx     context.Context       // background flights' parent; cancelled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup // one per running flight
}

// flight is one run of fn; val and err are written before done is closed.
type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// initLocked makes the zero value usable. g.mu must be held.
func (g *Group[T]) initLocked() {
	if g.flights == nil {
		g.flights = make(map[string]*flight[T])
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
}

// Do returns the result of fn for key, running fn only if no flight for
// key is already in flight (started by Do or Start); otherwise it waits for
// that flight. shared reports whether the result came from a flight another
// caller started.
//
// fn runs on a goroutine of its own, with a context that carries the first
// caller's values but not its cancellation or deadline: one impatient client
// must not cancel the fetch the others wait for. That context ends only
// when the Group closes; fn bounds its own upstream time. A caller whose ctx
// ends gets ctx.Err() at once and the flight goes on. A caller whose ctx is
// already done starts nothing.
//
// A panic in fn reaches every waiter as a [*PanicError]; it does not crash
// the process. After Close, Do returns [ErrClosed].
func (g *Group[T]) Do(ctx context.Context, key string, fn func(ctx context.Context) (T, error)) (v T, err error, shared bool) {
	if err := ctx.Err(); err != nil {
		return v, err, false
	}
	f, shared, err := g.join(ctx, key, fn)
	if err != nil {
		return v, err, false
	}
	select {
	case <-f.done:
		return f.val, f.err, shared
	case <-ctx.Done():
		return v, ctx.Err(), shared
	}
}

// join returns key's flight, starting one with fn if there is none;
// joined reports whether it was already there.
func (g *Group[T]) join(ctx context.Context, key string, fn func(context.Context) (T, error)) (f *flight[T], joined bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, false, ErrClosed
	}
	g.initLocked()
	if f, ok := g.flights[key]; ok {
		return f, true, nil
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// Shutdown is the one thing that ends a foreground flight early, so
	// Close never waits on an upstream that hangs.
	stop := context.AfterFunc(g.ctx, cancel)
	return g.startLocked(key, fctx, func() { stop(); cancel() }, fn), false, nil
}

// Start begins a background flight of fn for key, unless one (foreground
// or background) is already in flight for key or the Group is closed. It
// reports whether it started one. fn's context is the Group's own, cancelled
// by Close. Do callers that arrive meanwhile join the flight; its result
// otherwise goes nowhere, so fn stores what it fetched itself.
func (g *Group[T]) Start(key string, fn func(ctx context.Context) (T, error)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.initLocked()
	if _, ok := g.flights[key]; ok {
		return false
	}
	g.startLocked(key, g.ctx, func() {}, fn)
	return true
}

// startLocked registers a flight for key and runs fn on a new goroutine.
// release frees ctx's resources once fn returns. g.mu must be held, which
// also orders wg.Add before Close's wg.Wait.
func (g *Group[T]) startLocked(key string, ctx context.Context, release func(), fn func(context.Context) (T, error)) *flight[T] {
	f := &flight[T]{done: make(chan struct{})}
	g.flights[key] = f
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer release()
		g.run(ctx, key, f, fn)
	}()
	return f
}

// run calls fn and publishes its result, or the panic it raised, to f's
// waiters.
func (g *Group[T]) run(ctx context.Context, key string, f *flight[T], fn func(context.Context) (T, error)) {
	returned := false
	defer func() {
		if !returned {
			// recover is nil after runtime.Goexit; waiters still need an answer.
			f.err = &PanicError{Value: recover(), Stack: debug.Stack()}
		}
		g.finish(key, f)
	}()
	f.val, f.err = fn(ctx)
	returned = true
}

// finish removes f from the map before waking its waiters, so a caller that
// arrives after the wake-up starts a new flight instead of reading an old
// result. fn has stored what it fetched by then; a caller that decided to
// fetch on what it read before it called Do or Start must read again
// inside fn, or a flight that ended in between is fetched twice.
func (g *Group[T]) finish(key string, f *flight[T]) {
	g.mu.Lock()
	delete(g.flights, key)
	g.mu.Unlock()
	close(f.done)
}

// InFlight returns the number of flights currently running.
func (g *Group[T]) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.flights)
}

// Close cancels every flight's context and waits for the flights to end;
// their waiters get what fn returns. Afterwards Do returns [ErrClosed] and
// Start returns false. Close is idempotent.
func (g *Group[T]) Close() {
	g.mu.Lock()
	g.initLocked()
	g.closed = true
	g.cancel()
	g.mu.Unlock()
	g.wg.Wait()
}
