package store

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

// result is what one Do call returned.
type result struct {
	v      int
	err    error
	shared bool
}

// blockingFetch returns a fn that counts its runs, records its context,
// and returns v once release is closed.
type blockingFetch struct {
	runs    atomic.Int32
	release chan struct{}
	ctx     atomic.Pointer[context.Context]
}

func newBlockingFetch() *blockingFetch { return &blockingFetch{release: make(chan struct{})} }

func (b *blockingFetch) fn(v int) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		b.runs.Add(1)
		b.ctx.Store(&ctx)
		<-b.release
		return v, nil
	}
}

// doAsync runs g.Do on a new goroutine and delivers its result on the channel.
func doAsync(ctx context.Context, g *Group[int], key string, fn func(context.Context) (int, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		v, err, shared := g.Do(ctx, key, fn)
		ch <- result{v, err, shared}
	}()
	return ch
}

func TestGroupCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group[int]
		defer g.Close()
		b := newBlockingFetch()
		const callers = 1000
		results := make([]<-chan result, callers)
		for i := range results {
			results[i] = doAsync(t.Context(), &g, "cold", b.fn(42))
		}
		synctest.Wait()
		if n := g.InFlight(); n != 1 {
			t.Fatalf("InFlight = %d, want 1", n)
		}
		close(b.release)
		leaders := 0
		for i, ch := range results {
			r := <-ch
			if r.err != nil || r.v != 42 {
				t.Fatalf("caller %d: %+v, want 42", i, r)
			}
			if !r.shared {
				leaders++
			}
		}
		if runs := b.runs.Load(); runs != 1 || leaders != 1 {
			t.Errorf("fn ran %d times, %d unshared results; want 1 and 1", runs, leaders)
		}
		if n := g.InFlight(); n != 0 {
			t.Errorf("InFlight after = %d, want 0", n)
		}
	})
}

func TestGroupSequentialDoRunsAgain(t *testing.T) {
	var g Group[int]
	defer g.Close()
	var runs atomic.Int32
	fn := func(context.Context) (int, error) { return int(runs.Add(1)), nil }
	for want := 1; want <= 3; want++ {
		v, err, shared := g.Do(context.Background(), "k", fn)
		if v != want || err != nil || shared {
			t.Fatalf("Do #%d = %d, %v, %v; want a fresh run", want, v, err, shared)
		}
	}
}

func TestGroupCallerGivesUp(t *testing.T) {
	tests := []struct {
		name        string
		cancelFirst bool // the caller that gives up started the flight; else it joined
		timeout     bool // gives up by deadline rather than cancel
	}{
		{"starter cancels", true, false},
		{"joiner cancels", false, false},
		{"starter times out", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testCallerGivesUp(t, tt.cancelFirst, tt.timeout) })
		})
	}
}

func testCallerGivesUp(t *testing.T, cancelFirst, timeout bool) {
	var g Group[int]
	defer g.Close()
	b := newBlockingFetch()
	base := context.WithValue(t.Context(), ctxKey{}, "from-first")
	impatient, cancel := context.WithCancel(base)
	if timeout {
		impatient, cancel = context.WithTimeout(base, time.Second)
	}
	defer cancel()
	patient := base

	first, second := impatient, patient
	if !cancelFirst {
		first, second = patient, impatient
	}
	r1 := doAsync(first, &g, "k", b.fn(7))
	synctest.Wait()
	r2 := doAsync(second, &g, "k", b.fn(8))
	synctest.Wait()

	if timeout {
		time.Sleep(time.Second)
	} else {
		cancel()
	}
	gaveUp, waited := r1, r2
	if !cancelFirst {
		gaveUp, waited = r2, r1
	}
	if r := <-gaveUp; !errors.Is(r.err, impatient.Err()) || r.err == nil {
		t.Fatalf("impatient caller got %+v, want %v", r, impatient.Err())
	}
	synctest.Wait()
	fctx := *b.ctx.Load()
	if fctx.Err() != nil {
		t.Fatalf("fn's context ended with a caller's: %v", fctx.Err())
	}
	if _, ok := fctx.Deadline(); ok {
		t.Error("fn's context inherited a caller's deadline")
	}
	if got := fctx.Value(ctxKey{}); got != "from-first" {
		t.Errorf("fn's context value = %v, want the first caller's", got)
	}
	close(b.release)
	if r := <-waited; r.err != nil || r.v != 7 {
		t.Errorf("patient caller got %+v, want 7 from the one flight", r)
	}
	if runs := b.runs.Load(); runs != 1 {
		t.Errorf("fn ran %d times, want 1", runs)
	}
}

func TestGroupDoAlreadyDone(t *testing.T) {
	var g Group[int]
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	_, err, _ := g.Do(ctx, "k", func(context.Context) (int, error) { ran = true; return 0, nil })
	if !errors.Is(err, context.Canceled) || ran || g.InFlight() != 0 {
		t.Errorf("Do with done ctx: err %v, ran %v, in flight %d", err, ran, g.InFlight())
	}
}

func TestGroupStartDuringDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group[int]
		defer g.Close()
		b := newBlockingFetch()
		r := doAsync(t.Context(), &g, "k", b.fn(1))
		synctest.Wait()
		var bgRuns atomic.Int32
		if g.Start("k", func(context.Context) (int, error) { bgRuns.Add(1); return 2, nil }) {
			t.Error("Start during a Do flight returned true")
		}
		if !g.Start("other", func(context.Context) (int, error) { bgRuns.Add(1); return 2, nil }) {
			t.Error("Start of an idle key returned false")
		}
		close(b.release)
		if got := <-r; got.v != 1 || got.err != nil {
			t.Errorf("Do = %+v, want 1", got)
		}
		synctest.Wait()
		if n := bgRuns.Load(); n != 1 {
			t.Errorf("background fn ran %d times, want 1 (only for the idle key)", n)
		}
	})
}

func TestGroupDoJoinsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group[int]
		defer g.Close()
		b := newBlockingFetch()
		if !g.Start("k", b.fn(10)) {
			t.Fatal("Start of an idle key returned false")
		}
		synctest.Wait()
		var doRuns atomic.Int32
		r := doAsync(t.Context(), &g, "k", func(context.Context) (int, error) { doRuns.Add(1); return 20, nil })
		synctest.Wait()
		close(b.release)
		got := <-r
		if got.v != 10 || got.err != nil || !got.shared {
			t.Errorf("Do = %+v, want the background flight's 10, shared", got)
		}
		if n := b.runs.Load() + doRuns.Load(); n != 1 {
			t.Errorf("fetches = %d, want 1", n)
		}
	})
}

func TestGroupConcurrentStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group[int]
		defer g.Close()
		b := newBlockingFetch()
		var started atomic.Int32
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				if g.Start("k", b.fn(1)) {
					started.Add(1)
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		close(b.release)
		synctest.Wait()
		if s, r := started.Load(), b.runs.Load(); s != 1 || r != 1 {
			t.Errorf("Start returned true %d times, fn ran %d times; want 1 and 1", s, r)
		}
	})
}

func TestGroupPanic(t *testing.T) {
	tests := []struct {
		name  string
		fn    func(context.Context) (int, error)
		value any
	}{
		{"panic", func(context.Context) (int, error) { panic("boom") }, "boom"},
		{"goexit", func(context.Context) (int, error) { runtime.Goexit(); return 0, nil }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testPanic(t, tt.fn, tt.value) })
		})
	}
}

func testPanic(t *testing.T, fn func(context.Context) (int, error), value any) {
	var g Group[int]
	defer g.Close()
	release := make(chan struct{})
	gated := func(ctx context.Context) (int, error) { <-release; return fn(ctx) }
	results := make([]<-chan result, 10)
	for i := range results {
		results[i] = doAsync(t.Context(), &g, "k", gated)
	}
	synctest.Wait()
	close(release)
	for i, ch := range results {
		r := <-ch
		var pe *PanicError
		if !errors.Is(r.err, ErrFetchPanicked) || !errors.As(r.err, &pe) {
			t.Fatalf("waiter %d got %v, want ErrFetchPanicked", i, r.err)
		}
		if pe.Value != value || len(pe.Stack) == 0 {
			t.Errorf("PanicError = %v (stack %d bytes), want value %v", pe.Value, len(pe.Stack), value)
		}
	}
	v, err, _ := g.Do(t.Context(), "k", func(context.Context) (int, error) { return 5, nil })
	if v != 5 || err != nil {
		t.Errorf("Do after panic = %d, %v; want a new flight", v, err)
	}
}

func TestGroupCloseCancelsAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group[int]
		untilCancelled := func(ctx context.Context) (int, error) {
			<-ctx.Done()
			time.Sleep(time.Second) // winding down takes time; Close must wait for it
			return 0, ctx.Err()
		}
		if !g.Start("bg", untilCancelled) {
			t.Fatal("Start returned false")
		}
		fg := doAsync(t.Context(), &g, "fg", untilCancelled)
		synctest.Wait()

		closed := make(chan struct{})
		go func() { g.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while flights were still running")
		default:
		}
		if r := <-fg; !errors.Is(r.err, context.Canceled) {
			t.Errorf("foreground flight at Close = %+v, want context.Canceled from fn", r)
		}
		<-closed
		if n := g.InFlight(); n != 0 {
			t.Errorf("InFlight after Close = %d", n)
		}
		assertRefuses(t, &g)
		g.Close() // idempotent
	})
}

func assertRefuses(t *testing.T, g *Group[int]) {
	t.Helper()
	ran := false
	fn := func(context.Context) (int, error) { ran = true; return 1, nil }
	if _, err, _ := g.Do(context.Background(), "k", fn); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: %v, want ErrClosed", err)
	}
	if g.Start("k", fn) {
		t.Error("Start after Close returned true")
	}
	if ran {
		t.Error("fn ran after Close")
	}
}

func TestGroupZeroClose(t *testing.T) {
	var g Group[int]
	g.Close()
	g.Close()
	assertRefuses(t, &g)
}
