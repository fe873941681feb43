package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// soak is an hour's run of 3 nodes sampled every 10 s, each sample's
// figures drawn by at (seconds since start) for every node.
func soak(end time.Duration, at func(node string, s float64) (rssMiB, goroutines, fds float64)) *History {
	h := base()
	h.Meta.End = end.Nanoseconds()
	h.Meta.Soak = &Soak{Every: 10 * time.Second, Warmup: 10 * time.Minute, Window: 10 * time.Minute}
	for s := 0.0; s <= end.Seconds(); s += 10 {
		for _, n := range h.Meta.Nodes {
			rss, g, f := at(n, s)
			if rss < 0 {
				continue // the node is down
			}
			h.Resources = append(h.Resources, history.Resources{Time: sec(s), Node: n, PID: 100,
				RSS: int64(rss * (1 << 20)), Goroutines: int(g), FDs: int(f)})
		}
	}
	return h
}

func steady(string, float64) (float64, float64, float64) { return 60, 300, 40 }

// withSockets counts every fd of h's samples but files as a socket: files
// 0 makes them all sockets for the first 30 minutes and adds the growth
// after as files (a handle leak), any other keeps files fixed.
func withSockets(h *History, files int) *History {
	for i := range h.Resources {
		r := &h.Resources[i]
		switch {
		case files > 0:
			r.Sockets = r.FDs - files
		case r.Time < sec(1800):
			r.Sockets = r.FDs - 8
		default:
			r.Sockets = 32 // steady's 40 less 8 files: the rest are files
		}
	}
	return h
}

func TestResourcesChecker(t *testing.T) {
	hour := time.Hour
	cases := []struct {
		name string
		h    *History
		pass bool
		want string // in the first violation
	}{
		{"steady passes", soak(hour, steady), true, ""},
		{"warmup growth is left out", soak(hour, func(_ string, s float64) (float64, float64, float64) {
			return 20 + min(s, 600)/600*40, 100 + min(s, 600)/3, 20 + min(s, 600)/30
		}), true, ""},
		{"rss growing 5% passes", soak(hour, func(_ string, s float64) (float64, float64, float64) {
			return 60 * (1 + 0.05*max(s-600, 0)/3000), 300, 40
		}), true, ""},
		{"rss growing 15% fails", soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n != "n2" {
				return steady(n, s)
			}
			return 60 * (1 + 0.15*max(s-600, 0)/3000), 300, 40
		}), false, "n2 rss grew"},
		{"restarts with a cold cache pass", soak(hour, func(n string, s float64) (float64, float64, float64) {
			since := int(s) % 400 // a restart every 400 s, 60 s to refill
			if since < 10 {
				return -1, 0, 0
			}
			return 30 + 30*min(float64(since), 60)/60, 300, 40
		}), true, ""},
		{"goroutines drifting up fail", soak(hour, func(n string, s float64) (float64, float64, float64) {
			return 60, 300 + max(s-600, 0)/10, 40
		}), false, "goroutines drifted up"},
		{"fds over the drift for one window, back in the next, pass", soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n == "n3" && s >= 1800 && s < 2400 {
				return 60, 300, 50
			}
			return steady(n, s)
		}), true, ""},
		{"fds over the drift for two windows in a row fail", soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n == "n3" && s >= 1800 && s < 3000 {
				return 60, 300, 50
			}
			return steady(n, s)
		}), false, "n3 fds drifted up"},
		{"fds over the drift in the last window fail", soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n == "n3" && s >= 3000 {
				return 60, 300, 50
			}
			return steady(n, s)
		}), false, "n3 fds drifted up"},
		{"a partition's goroutine spike under the ceiling passes", soak(hour, func(n string, s float64) (float64, float64, float64) {
			if s > 2000 && s < 2030 {
				return 60, 500, 40
			}
			if s > 200 && s < 230 {
				return 60, 400, 40
			}
			return steady(n, s)
		}), true, ""},
		{"fds past the ceiling fail", soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n == "n3" && s > 3000 && s < 3030 {
				return 60, 300, 100
			}
			return steady(n, s)
		}), false, "n3 fds reached 100"},
		{"unknown goroutines are left out", soak(hour, func(n string, s float64) (float64, float64, float64) {
			if int(s)%30 == 0 {
				return 60, -1, 40
			}
			return steady(n, s)
		}), true, ""},
		{"sockets over the drift, files flat, pass (connections follow the pools)", withSockets(soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n == "n3" && s >= 3000 {
				return 60, 300, 50
			}
			return steady(n, s)
		}), 8), true, ""},
		{"files over the drift fail, whatever the sockets", withSockets(soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n == "n3" && s >= 3000 {
				return 60, 300, 50
			}
			return steady(n, s)
		}), 0), false, "n3 fds other than sockets drifted up"},
		{"sockets past the ceiling fail", withSockets(soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n == "n3" && s > 3000 && s < 3030 {
				return 60, 300, 100
			}
			return steady(n, s)
		}), 8), false, "n3 fds reached 100"},
		{"a run too short to judge fails", soak(25*time.Minute, steady), false, "too short"},
		{"a node never sampled fails", soak(hour, func(n string, s float64) (float64, float64, float64) {
			if n == "n1" {
				return -1, 0, 0
			}
			return steady(n, s)
		}), false, "n1: no samples"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Resources(c.h, DefaultConfig())
			if r.Pass != c.pass {
				t.Fatalf("pass = %v, want %v; violations %+v; figures %+v", r.Pass, c.pass, r.Violations, r.Figures)
			}
			if c.want != "" && !strings.Contains(r.Violations[0].What, c.want) {
				t.Fatalf("first violation %q, want it to say %q", r.Violations[0].What, c.want)
			}
		})
	}
}

func TestCheckRunsResourcesOnlyForSoaks(t *testing.T) {
	has := func(rs []Result) bool {
		for _, r := range rs {
			if r.Name == "resources" {
				return true
			}
		}
		return false
	}
	if has(Check(base(), DefaultConfig())) {
		t.Error("a plain chaos run got a resources verdict")
	}
	if !has(Check(soak(time.Hour, steady), DefaultConfig())) {
		t.Error("a soak run got no resources verdict")
	}
}
