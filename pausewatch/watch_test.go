package pausewatch

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee/levee/internal/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClock is a manual clock.
func newClock() *testutil.Clock { return testutil.NewClock(time.Time{}) }

func TestAGapLongerThanGapHoldsTheWatchForHold(t *testing.T) {
	// Each step advances the clock, then beats (or not), then reads.
	type step struct {
		advance time.Duration
		beat    bool
		held    bool
		stops   uint64
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{name: "steady beats never hold", steps: []step{
			{advance: time.Second, beat: true}, {advance: time.Second, beat: true}, {advance: 1900 * time.Millisecond, beat: true},
		}},
		{name: "a gap of exactly Gap is no stop", steps: []step{
			{advance: 2 * time.Second, beat: true},
		}},
		{name: "a stop holds from its beat for Hold", steps: []step{
			{advance: 10 * time.Second, beat: true, held: true, stops: 1},
			{advance: 1500 * time.Millisecond, beat: true, held: true, stops: 1},
			{advance: 1500 * time.Millisecond, beat: true, held: true, stops: 1},
			{advance: 1999 * time.Millisecond, beat: true, held: true, stops: 1},
			{advance: time.Millisecond, beat: true, held: false, stops: 1},
		}},
		{name: "a second stop in the hold holds again from its beat", steps: []step{
			{advance: 10 * time.Second, beat: true, held: true, stops: 1},
			{advance: 1500 * time.Millisecond, beat: true, held: true, stops: 1},
			{advance: 3 * time.Second, beat: true, held: true, stops: 2},
			{advance: 1500 * time.Millisecond, beat: true, held: true, stops: 2},
			{advance: 1500 * time.Millisecond, beat: true, held: true, stops: 2},
			{advance: 1500 * time.Millisecond, beat: true, held: true, stops: 2},
			{advance: 500 * time.Millisecond, beat: true, held: false, stops: 2},
		}},
		{name: "without Start an unbeaten gap is not seen until the beat", steps: []step{
			{advance: 10 * time.Second, held: false},
			{beat: true, held: true, stops: 1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			w, err := New(Config{Gap: 2 * time.Second, Hold: 5 * time.Second, Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				c.Advance(s.advance)
				if s.beat {
					w.Beat()
				}
				if got := w.Held(); got != s.held {
					t.Fatalf("step %d: Held = %v, want %v", i, got, s.held)
				}
				if got := w.Stops(); got != s.stops {
					t.Fatalf("step %d: Stops = %d, want %d", i, got, s.stops)
				}
			}
		})
	}
}

func TestResumedIsTheBeatThatSawTheStop(t *testing.T) {
	c := newClock()
	w, err := New(Config{Gap: time.Second, Hold: time.Second, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Resumed(); !got.IsZero() {
		t.Fatalf("Resumed before any stop = %v, want zero", got)
	}
	c.Advance(5 * time.Second)
	w.Beat()
	at := c.Now()
	for range 4 { // beating past the hold: Resumed still names the last stop
		c.Advance(500 * time.Millisecond)
		w.Beat()
	}
	if w.Held() {
		t.Fatal("held past Hold")
	}
	if got := w.Resumed(); !got.Equal(at) {
		t.Fatalf("Resumed = %v, want the stop's beat %v", got, at)
	}
}

// A request served the instant the process resumes runs before the
// beating goroutine has: the stale last beat tells it already.
func TestAStopIsHeldBeforeItsBeatRunsOnceStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClock()
		w, err := New(Config{Gap: time.Second, Hold: 3 * time.Second, Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		w.Start()
		defer w.Close()
		time.Sleep(2 * time.Second) // beats on the bubble's clock; c has not moved: no gap
		synctest.Wait()
		if w.Held() {
			t.Fatal("held with no stop")
		}
		c.Advance(10 * time.Second) // stopped: no beat ran meanwhile
		if !w.Held() {
			t.Fatal("not held right after a stop no beat has seen")
		}
		if got := w.Resumed(); !got.IsZero() {
			t.Fatalf("Resumed before the beat = %v, want zero (Held tells)", got)
		}
		time.Sleep(w.cfg.Tick) // the goroutine beats and sees the gap
		synctest.Wait()
		if got, want := w.Resumed(), c.Now(); !got.Equal(want) {
			t.Fatalf("Resumed after the beat = %v, want %v", got, want)
		}
		if w.Stops() != 1 || !w.Held() {
			t.Fatalf("after the beat: stops %d held %v, want 1 true", w.Stops(), w.Held())
		}
		for range 4 { // beating on, the clock moving with it: the hold ends
			c.Advance(time.Second)
			time.Sleep(w.cfg.Tick)
			synctest.Wait()
		}
		if w.Held() {
			t.Fatal("still held past Hold")
		}
	})
}

// TestCloseIsSafeTwiceAndEndsTheWatch: Close without Start, twice, or
// after Start is safe; a closed Watch is never held by its silent beat,
// and a Start after Close starts nothing (goleak, TestMain).
func TestCloseIsSafeTwiceAndEndsTheWatch(t *testing.T) {
	w, err := New(Config{Gap: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	w.Close()
	c := newClock()
	w2, _ := New(Config{Gap: time.Second, Now: c.Now})
	w2.Start()
	w2.Start()
	w2.Close()
	w2.Close()
	c.Advance(5 * time.Second)
	if w2.Held() {
		t.Fatal("a closed Watch is held by the beats it no longer makes")
	}
	w2.Start()
}

func TestValidateRefusesWhatCannotRun(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"gap only", Config{Gap: time.Second}, true},
		{"no gap", Config{}, false},
		{"negative hold", Config{Gap: time.Second, Hold: -1}, false},
		{"tick as long as the gap", Config{Gap: time.Second, Tick: time.Second}, false},
		{"negative tick", Config{Gap: time.Second, Tick: -1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrBadConfig) {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
