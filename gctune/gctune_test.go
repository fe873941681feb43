package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentKeepsTheFloorOfRoomAboveTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	tuner := New(25, 64*mib)
	for _, tc := range []struct {
		name string
		live uint64
		want int
	}{
		{"before the first collection (0 read as the runtime's 4 MiB)", 0, 1600},
		{"below the runtime's minimum heap", 1, 1600},
		{"4 MiB live: 64 MiB of room is 1600 %", 4 * mib, 1600},
		{"a room that does not divide evenly rounds up", 3*mib + 1, 1600},
		{"64 MiB live: 100 %", 64 * mib, 100},
		{"256 MiB live: the configured 25 % gives the floor", 256 * mib, 25},
		{"a full cache: the configured 25 %", 2048 * mib, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tuner.Percent(tc.live); got != tc.want {
				t.Errorf("Percent(%d) = %d, want %d", tc.live, got, tc.want)
			}
		})
	}
}

func TestPercentIsBoundedForAHugeFloor(t *testing.T) {
	if got := New(25, 1<<62).Percent(0); got != maxPercent {
		t.Errorf("Percent = %d, want the bound %d", got, maxPercent)
	}
}

// fakeRuntime records what a Tuner sets, for a live heap the test moves.
type fakeRuntime struct {
	live uint64
	set  []int
}

func (f *fakeRuntime) tuner(percent int, floor int64) *Tuner {
	t := New(percent, floor)
	t.live = func() uint64 { return f.live }
	t.set = func(p int) int { f.set = append(f.set, p); return 0 }
	return t
}

func TestRetuneSetsGOGCOnlyWhenItChangesAndStopRestoresTheConfiguredPercent(t *testing.T) {
	f := &fakeRuntime{live: 4 << 20}
	tuner := f.tuner(25, 64<<20)
	for _, live := range []uint64{4 << 20, 4 << 20, 64 << 20, 1 << 30, 1 << 30} {
		f.live = live
		if !tuner.retune() {
			t.Fatal("retune reported stopped before Stop")
		}
	}
	tuner.Stop()
	tuner.Stop()
	if tuner.retune() {
		t.Error("retune after Stop did not report stopped")
	}
	want := []int{1600, 100, 25, 25} // the last: Stop's, once
	if len(f.set) != len(want) {
		t.Fatalf("set %v, want %v", f.set, want)
	}
	for i := range want {
		if f.set[i] != want[i] {
			t.Fatalf("set %v, want %v", f.set, want)
		}
	}
}

// TestTunerRetunesTheRuntimeAfterEachCollection runs a Tuner on the real
// runtime: each collection retunes GOGC for the live heap it left, and
// Stop ends it with the configured percent in force.
func TestTunerRetunesTheRuntimeAfterEachCollection(t *testing.T) {
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	tuner := New(25, 64<<20)
	tuner.Start()
	for range 3 {
		before := tuner.Retunes()
		runtime.GC()
		waitFor(t, func() bool { return tuner.Retunes() > before })
	}
	if got, want := debug.SetGCPercent(-1), tuner.Percent(liveHeap()); got != want {
		t.Errorf("GOGC after a collection = %d, want %d for the live heap", got, want)
	}
	tuner.Stop()
	if got := debug.SetGCPercent(100); got != 25 {
		t.Errorf("GOGC after Stop = %d, want the configured 25", got)
	}
	stopped := tuner.Retunes()
	runtime.GC()
	runtime.GC()
	if got := tuner.Retunes(); got != stopped {
		t.Errorf("retuned %d times after Stop", got-stopped)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for a retune after a collection")
		}
		runtime.GC() // the sentinel allocated during a cycle is freed by the next
		time.Sleep(time.Millisecond)
	}
}
