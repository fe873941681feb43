package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestClockAdvancesOnlyWhenTold(t *testing.T) {
	c := NewClock(time.Time{})
	if !c.Now().Equal(Epoch) {
		t.Fatalf("start = %v, want %v", c.Now(), Epoch)
	}
	c.Advance(time.Minute)
	if got := c.Now().Sub(Epoch); got != time.Minute {
		t.Fatalf("after Advance(1m): %v", got)
	}
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	WaitFor(t, 5*time.Second, "three polls", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("polled %d times, want 3", n.Load())
	}
}

func TestWriterDropsLinesAfterTheTest(t *testing.T) {
	var w *LogWriter
	t.Run("inner", func(t *testing.T) {
		w = Writer(t)
		Logger(t, 0).Info("seen")
	})
	if _, err := w.Write([]byte("after the end\n")); err != nil { // must not panic
		t.Fatal(err)
	}
}
