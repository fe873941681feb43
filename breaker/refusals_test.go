package breaker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/internal/testutil"
)

// refusalLines is a RefusalLog over a fake clock that keeps its log lines
// and its counts by reason.
type refusalLines struct {
	clock *testutil.Clock
	log   *RefusalLog
	buf   bytes.Buffer

	mu     sync.Mutex
	counts map[string]int
}

func newRefusalLines() *refusalLines {
	r := &refusalLines{clock: testutil.NewClock(time.Unix(1000, 0)), counts: map[string]int{}}
	logger := slog.New(slog.NewJSONHandler(&r.buf, nil))
	r.log = NewRefusalLog(logger, r.clock.Now, func(reason string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.counts[reason]++
	})
	return r
}

// lines returns the logged lines' from and suppressed fields, in order.
func (r *refusalLines) lines(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(r.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var rec struct {
			From       string `json:"from"`
			Reason     string `json:"reason"`
			Suppressed int    `json:"suppressed"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s/%s/%d", rec.From, rec.Reason, rec.Suppressed))
	}
	return out
}

// TestRefusedCommandsAreCountedAndLoggedOncePerSenderPerMinute: every
// refusal is counted by reason; each sender gets at most one log line a
// minute, which says how many of its refusals went unlogged; the Mux's
// own refusals count as malformed.
func TestRefusedCommandsAreCountedAndLoggedOncePerSenderPerMinute(t *testing.T) {
	r := newRefusalLines()
	sender := &RefusedError{Reason: ReasonSender, Err: errors.New("command for n1")}
	bounds := &RefusedError{Reason: ReasonBounds, Err: errors.New("open for a year")}
	for range 3 {
		r.log.Refused("n2", sender)
	}
	r.log.Refused("n3", bounds)
	r.log.Refused("n3", fmt.Errorf("%w: %w", consensus.ErrRefused, consensus.ErrBadEntry))
	r.clock.Advance(refusalLogEvery - time.Second)
	r.log.Refused("n2", sender)
	r.clock.Advance(time.Second)
	r.log.Refused("n2", bounds)

	want := []string{"n2/sender/0", "n3/bounds/0", "n2/bounds/3"}
	if got := r.lines(t); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("logged %q, want %q", got, want)
	}
	wantCounts := map[string]int{ReasonSender: 4, ReasonBounds: 2, ReasonMalformed: 1}
	if fmt.Sprint(r.counts) != fmt.Sprint(wantCounts) {
		t.Fatalf("counted %v, want %v", r.counts, wantCounts)
	}
}

// TestRefusalLogStaysBoundedUnderForgedSenderNames: a caller that states a
// new sender name with every command cannot grow the log's memory past
// its bound, and still gets logged (in the shared slot) once a minute.
func TestRefusalLogStaysBoundedUnderForgedSenderNames(t *testing.T) {
	r := newRefusalLines()
	err := &RefusedError{Reason: ReasonSender, Err: errors.New("forged")}
	for i := range 10 * maxRefusalSenders {
		r.log.Refused(fmt.Sprintf("forged-%d", i), err)
	}
	if n := len(r.log.senders); n > maxRefusalSenders+1 {
		t.Fatalf("%d senders remembered, want at most %d", n, maxRefusalSenders+1)
	}
	if got := len(r.lines(t)); got != maxRefusalSenders+1 {
		t.Fatalf("%d lines, want one per remembered sender plus one shared (%d)", got, maxRefusalSenders+1)
	}
	r.clock.Advance(refusalLogEvery)
	r.log.Refused("forged-new", err)
	if got := r.lines(t); got[len(got)-1] != "forged-new/sender/0" {
		t.Fatalf("after a quiet minute a new sender was not logged under its name: %q", got[len(got)-1])
	}
}
