package cachefile

import (
	"errors"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/peer"
)

// TestKeeperSavesOnStopAndPeriodicallyAndLoadsBack: a graceful Stop saves,
// a periodic save runs while started, Stop before Start writes nothing,
// and Load hands every saved entry to Put.
func TestKeeperSavesOnStopAndPeriodicallyAndLoadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.snapshot")
	held := entries(3)
	k := &Keeper{Path: path, Entries: func() iter.Seq[*peer.Entry] { return slices.Values(held) },
		Put: func(*peer.Entry) bool { return true }}
	k.Stop(true)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stop before Start wrote the file: %v", err)
	}
	k.Start()
	k.Stop(true)
	var got []string
	back := &Keeper{Path: path, Put: func(e *peer.Entry) bool { got = append(got, e.Key); return true }}
	back.Load()
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("loaded %v, want a b c", got)
	}

	os.Remove(path)
	periodic := &Keeper{Path: path, Every: 10 * time.Millisecond, Entries: k.Entries, Put: k.Put}
	periodic.Start()
	testutil.WaitFor(t, 5*time.Second, "a periodic save", func() bool { _, err := os.Stat(path); return err == nil })
	periodic.Stop(false)
}
