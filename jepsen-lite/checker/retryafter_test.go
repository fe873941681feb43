package checker

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

const raKey = "/api/stories/1/comments"

// limited is an upstream answer with status and Retry-After ra that
// arrived at at and was sent 1 ms later.
func limited(at float64, status int, ra, node string) history.UpstreamCall {
	c := call("acme", raKey, at, status, node)
	c.Answered, c.RetryAfter = c.Time+sec(0.001), ra
	return c
}

// withCalls is a base history holding calls.
func withCalls(calls ...history.UpstreamCall) *History {
	h := base()
	h.Upstream = calls
	return h
}

func TestRetryAfter(t *testing.T) {
	runCases(t, RetryAfter, []checkCase{
		{name: "no call until the Retry-After ends", pass: true, build: func() *History {
			return withCalls(limited(10, 429, "2", "n1"), call("acme", raKey, 12.01, 200, "n2"), call("acme", raKey, 12.02, 200, "n3"))
		}},
		{name: "a call inside the window", pass: false, violations: 1, build: func() *History {
			return withCalls(limited(10, 429, "2", "n1"), call("acme", raKey, 11, 200, "n2"))
		}},
		{name: "calls on the wire within the slack are allowed", pass: true, build: func() *History {
			return withCalls(limited(10, 429, "2", "n1"), call("globex", raKey, 10.1, 429, "n2"), call("acme", raKey, 10.2, 200, "n3"))
		}},
		{name: "every node is held, not only the one that got the answer", pass: false, violations: 2, build: func() *History {
			return withCalls(limited(10, 429, "2", "n1"), call("acme", raKey, 10.5, 200, "n1"), call("acme", raKey, 11.9, 200, "n3"))
		}},
		{name: "a later answer's window outlasts the first", pass: false, violations: 1, build: func() *History {
			// The second 429 was on the wire (within the slack) but its own
			// Retry-After runs 100 ms past the first's.
			return withCalls(limited(10, 429, "2", "n1"), limited(10.1, 429, "2", "n2"), call("acme", raKey, 12.05, 200, "n3"))
		}},
		{name: "an HTTP-date Retry-After ends at the date", pass: false, violations: 1, build: func() *History {
			date := t0.Add(13 * time.Second).Format(http.TimeFormat)
			return withCalls(limited(10, 429, date, "n1"), call("acme", raKey, 12.5, 200, "n2"), call("acme", raKey, 13, 200, "n2"))
		}},
		{name: "a 503 with Retry-After opens a window", pass: false, violations: 1, build: func() *History {
			return withCalls(limited(10, 503, "2", "n1"), call("acme", raKey, 11, 200, "n2"))
		}},
		{name: "a 503 without Retry-After or a 500 with one opens none", pass: true, build: func() *History {
			return withCalls(limited(10, 503, "", "n1"), limited(20, 500, "2", "n1"), call("acme", raKey, 11, 200, "n2"), call("acme", raKey, 21, 200, "n2"))
		}},
		{name: "the arrival stands in for an answer time not recorded", pass: false, violations: 1, build: func() *History {
			c := limited(10, 429, "2", "n1")
			c.Answered = 0
			return withCalls(c, call("acme", raKey, 11.9, 200, "n2"), call("acme", raKey, 12, 200, "n2"))
		}},
		{name: "a Retry-After not understood opens no window", pass: true, build: func() *History {
			return withCalls(limited(10, 429, "soon", "n1"), call("acme", raKey, 11, 200, "n2"))
		}},
		{name: "an upstream fault around the window is judged", pass: false, violations: 1, build: func() *History {
			h := withCalls(limited(10, 429, "2", "n1"), call("acme", raKey, 11, 200, "n2"))
			h.Faults = []history.Fault{fault("upstream-429", 5, 20)}
			return h
		}},
		{name: "a partition over the window: not judged", pass: true, build: func() *History {
			h := withCalls(limited(10, 429, "2", "n1"), call("acme", raKey, 11, 200, "n2"))
			h.Faults = []history.Fault{fault("isolate-node", 11.5, 30, "n2")}
			return h
		}},
		{name: "a restart that ended within Settle: not judged", pass: true, build: func() *History {
			h := withCalls(limited(10, 429, "2", "n1"), call("acme", raKey, 11, 200, "n2"))
			h.Faults = []history.Fault{fault("kill", 2, 6, "n2")}
			return h
		}},
		{name: "a fault that ended more than Settle before is no excuse", pass: false, violations: 1, build: func() *History {
			h := withCalls(limited(10, 429, "2", "n1"), call("acme", raKey, 11, 200, "n2"))
			h.Faults = []history.Fault{fault("kill", 1, 4, "n2")}
			return h
		}},
		{name: "a skipped fault is no excuse", pass: false, violations: 1, build: func() *History {
			h := withCalls(limited(10, 429, "2", "n1"), call("acme", raKey, 11, 200, "n2"))
			f := fault("delay", 9, 20, "n2")
			f.Skipped = "unsupported here"
			h.Faults = []history.Fault{f}
			return h
		}},
		{name: "a call in a judged window is judged, whatever else overlaps", pass: false, violations: 1, build: func() *History {
			// The second window meets the partition, the first does not:
			// the call at 11 s is in both, the one at 20 s in the second only.
			h := withCalls(limited(10, 429, "2", "n1"), limited(10.1, 429, "30", "n1"), call("acme", raKey, 11, 200, "n2"),
				call("acme", raKey, 20, 200, "n2"))
			h.Faults = []history.Fault{fault("isolate-node", 30, 35, "n2")}
			return h
		}},
	})
}

func TestRetryAfterFigures(t *testing.T) {
	h := withCalls(
		limited(10, 429, "2", "n1"), call("acme", raKey, 10.1, 200, "n2"), call("acme", raKey, 11, 200, "n2"), // on the wire; violation
		limited(30, 429, "2", "n1"), call("acme", raKey, 31, 200, "n3"), // not judged: n3 isolated
		limited(50, 429, "later", "n1"),
	)
	h.Faults = []history.Fault{fault("isolate-node", 29, 40, "n3")}
	r := RetryAfter(h, DefaultConfig())
	want := map[string]string{
		"windows seen (429/503 with Retry-After)":            "2 (1 judged, 1 overlapping a cluster fault)",
		"calls inside windows":                               "2",
		"not judged (a cluster fault overlapped the window)": "1",
		"calls within the slack (on the wire, allowed)":      "1 (slack 250ms)",
		"Retry-After not understood (no window)":             "1",
		"violations":                                         "1",
	}
	for _, f := range r.Figures {
		if w, ok := want[f.Key]; ok && f.Value != w {
			t.Errorf("%s = %q, want %q", f.Key, f.Value, w)
		}
		delete(want, f.Key)
	}
	if len(want) > 0 {
		t.Errorf("figures %v lack %v", r.Figures, want)
	}
	if len(r.Violations) != 1 || !strings.Contains(r.Violations[0].What, "call from n2") ||
		!strings.Contains(r.Violations[0].What, "Retry-After 2 sent to n1 at 10.00s") {
		t.Errorf("violations = %+v", r.Violations)
	}
}
