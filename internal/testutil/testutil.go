package testutil

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Epoch is where a Clock starts unless told otherwise.
var Epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// Clock is a manually advanced clock, safe for concurrent use: cache
// windows and breaker timeouts pass when a test says so, not when a loaded
// machine gets round to it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at start (Epoch when start is zero).
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = Epoch
	}
	return &Clock{now: start}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// WaitFor polls cond every few milliseconds until it holds, and fails the
// test if timeout passes first. The poll interval is not a wait for an
// outcome: choose timeout for a loaded 2-core machine.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Logger returns a logger that writes to t.Log at level and above until
// the test ends, then drops lines: goroutines that log while shutting down
// (gossip, raft transports) must not make t.Log panic after the test.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer(t), &slog.HandlerOptions{Level: level}))
}

// Writer is the io.Writer behind Logger: one t.Log line per write, nothing
// once the test has ended.
func Writer(t testing.TB) *LogWriter {
	w := &LogWriter{t: t}
	t.Cleanup(w.stop)
	return w
}

// LogWriter writes to t.Log until its test ends.
type LogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *LogWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}

// UnansweredRaftFutures tells goleak about the one goroutine a closed
// consensus node may leave behind: a wait on a raft future that raft never
// answers because its Shutdown raced the entry's commit (hashicorp/raft#498;
// see consensus's await). It holds only the future and blocks forever, so
// it is not a leak of ours to fix.
var UnansweredRaftFutures = goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*deferError).Error")
