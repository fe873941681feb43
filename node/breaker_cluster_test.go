package node

import (
	"encoding/json"
	"github.com/levee/levee/consensus"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/api"
	"github.com/levee/levee/breaker"
	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/metrics"
)

func setDown(t *testing.T, c *testCluster) {
	t.Helper()
	if err := c.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		t.Fatal(err)
	}
}

// tripVia sends failing requests through node i for keys it owns until its
// committed table shows the route open.
func tripVia(t *testing.T, c *testCluster, i, from int) {
	t.Helper()
	// Three failures trip it. Under -race on 2 shared cores a Raft election
	// can eat a failure report (the proposal times out and the call still
	// fails), so up to a few more failing calls are allowed before giving up.
	keys := keysOwnedBy(c, i, from, 8)
	for n, p := range keys {
		if a := c.get(i, p, "X-Tenant", "acme"); a.status < 500 {
			t.Fatalf("failing call via node %d: status %d, want 5xx: %s", i, a.status, a.body)
		}
		if n < 2 {
			continue
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if c.view(i).State == breaker.Open {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Fatalf("node %d after %d failures: %s, want open", i, len(keys), c.view(i).State)
}

// leaderChanges sums the leadership changes every running node observed.
func leaderChanges(c *testCluster) uint64 {
	var sum uint64
	for _, i := range c.running() {
		sum += c.nodes[i].raft.Node.Stats().LeaderChanges
	}
	return sum
}

// probeCheck is the state before a burst that assertProbesPerPeriod needs.
type probeCheck struct {
	grants    float64
	calls     int
	leaders   uint64
	fallbacks uint64
	start     time.Time
}

func startProbeCheck(c *testCluster) probeCheck {
	return probeCheck{grants: grants(c, c.running()[0]), calls: c.up.Total(), leaders: leaderChanges(c),
		fallbacks: fallbacks(c), start: time.Now()}
}

// fallbacks sums the calls the nodes' local guards decided because a
// committed proposal failed (breaker.Replicated.Fallbacks).
func fallbacks(c *testCluster) uint64 {
	var n uint64
	for _, i := range c.running() {
		n += c.nodes[i].raft.Breaker.Fallbacks()
	}
	return n
}

// assertProbesPerPeriod checks a burst on a failing upstream: at most one
// committed probe per open period. With a stable leader there is at least
// one and every upstream call was a committed probe; if the load cost an
// election or a proposal (a timeout), nodes that could not commit used
// their local guards, which allow at most one probe per node per open
// period.
func assertProbesPerPeriod(t *testing.T, c *testCluster, p probeCheck, openFor time.Duration) {
	t.Helper()
	elapsed := time.Since(p.start)
	g := grants(c, c.running()[0]) - p.grants
	calls := float64(c.up.Total() - p.calls)
	periods := 1 + float64(elapsed/openFor)
	stable := leaderChanges(c) == p.leaders && fallbacks(c) == p.fallbacks
	t.Logf("burst: %v committed probe grants, %v upstream calls in %v, stable leader and no guard fallback %v", g, calls, elapsed, stable)
	switch {
	case g > periods || stable && g < 1:
		t.Fatalf("committed probe grants = %v in %v, want 1..%v", g, elapsed, periods)
	case stable && calls != g:
		t.Fatalf("upstream calls = %v, committed probes = %v: want equal", calls, g)
	case calls > g+float64(len(c.running()))*periods:
		t.Fatalf("upstream calls = %v, more than the committed probes (%v) plus one local probe per node per period", calls, g)
	}
}

// settled waits until every node shows the route in state want after a
// probe. If the load cost the probe's result its commit, the route stays
// half-open until the lease runs out; then one more call takes the probe
// and its result decides the route everywhere.
func settled(c *testCluster, want breaker.State) {
	c.t.Helper()
	id := 90000
	c.waitFor(15*time.Second, "every node "+want.String(), func() bool {
		first := c.running()[0]
		if v := c.view(first); v.State == breaker.HalfOpen && time.Now().After(v.ProbeUntil) {
			id++
			c.get(first, routePath(id), "X-Tenant", "acme")
		}
		for _, i := range c.running() {
			if c.view(i).State != want {
				return false
			}
		}
		return true
	})
}

// burstRaft gives the breaker tests, which fire hundreds of concurrent
// requests at three in-process nodes under -race, hashicorp/raft's own LAN
// timings: with 250 ms a leader whose heartbeats starve under the burst
// steps down ("failed to contact quorum") whenever a second test run shares
// the 2-core box, and the test then waits out elections instead of checking
// the breaker.
func burstRaft(_ int, o *Options) {
	o.Timings.Raft = consensus.DefaultTimings()
	o.Timings.ContactLimit = 3 * time.Second
}

// TestTripOpensEveryNodeWithOneProbePerPeriod: failures seen by one node open the
// breaker on every node; nobody calls the upstream while it is open; 300
// concurrent callers on distinct cold keys across nodes get exactly one
// probe per open period; a failed probe re-opens everywhere and a
// successful one closes everywhere.
//
// 300 callers are 100 per node racing for the one probe, and few enough
// that the burst leaves the leader its quorum on a loaded 2-core machine:
// with 1,000 it usually cost an election, and the check fell back to the
// looser bound it allows when the leader changes (assertProbesPerPeriod).
func TestTripOpensEveryNodeWithOneProbePerPeriod(t *testing.T) {
	t.Parallel()
	const openFor = 2 * time.Second
	c := newTestClusterWith(t, 3, burstRaft, breakerEdit(openFor, 1))
	setDown(t, c)
	tripVia(t, c, 0, 1000)
	waitAllState(c, breaker.Open)

	calls := c.up.Total()
	counts := burst(c, 30, 2000)
	if c.up.Total() != calls || counts[http.StatusServiceUnavailable] != 30 {
		t.Fatalf("while open: %d upstream calls, statuses %v; want none and all 503", c.up.Total()-calls, counts)
	}

	// The steps share the cluster and its helpers fail c.t, the test's own
	// t, so they are sequential blocks rather than subtests.
	{ // A failed probe re-opens everywhere.
		waitPastOpen(c, 0)
		p := startProbeCheck(c)
		counts := burst(c, 300, 10000)
		waitAgreed(c)
		assertProbesPerPeriod(t, c, p, openFor)
		t.Logf("failed probe: statuses %v", counts)
		settled(c, breaker.Open)
	}
	{ // A successful probe closes everywhere.
		c.up.Heal()
		waitPastOpen(c, 0)
		p := startProbeCheck(c)
		counts := burst(c, 300, 20000)
		settled(c, breaker.Closed)
		waitAgreed(c)
		g := grants(c, 0) - p.grants
		t.Logf("burst: %v committed probe grants, statuses %v, stable leader %v", g, counts, leaderChanges(c) == p.leaders)
		if g < 1 || g != 1 && leaderChanges(c) == p.leaders {
			t.Fatalf("probe grants = %v, want 1", g)
		}
		for _, i := range c.running() {
			if got := metrics.Counter(c.nodes[i].metrics.BreakerTrans, testRoute, "half-open", "closed"); got != 1 {
				t.Fatalf("node %d half-open→closed transitions = %v, want 1", i, got)
			}
		}
	}
}

// TestOpenBreakerSurvivesLeaderDeath: the committed open state survives the
// leader's death, a new leader takes over and still grants one probe.
func TestOpenBreakerSurvivesLeaderDeath(t *testing.T) {
	t.Parallel()
	c := newTestClusterWith(t, 3, burstRaft, breakerEdit(2*time.Second, 1))
	setDown(t, c)
	tripVia(t, c, 0, 1000)
	waitAllState(c, breaker.Open)
	old := leaderIndex(c)
	oldName := c.nodes[old].Name()
	c.crash(old)
	c.waitFor(10*time.Second, "a new leader", func() bool {
		for _, i := range c.running() {
			if l := c.nodes[i].raft.Node.State().LeaderID; l == "" || l == oldName {
				return false
			}
		}
		return true
	})
	waitAllState(c, breaker.Open)

	c.up.Heal()
	live := c.running()
	waitPastOpen(c, live[0])
	p := startProbeCheck(c)
	counts := burst(c, 200, 30000)
	settled(c, breaker.Closed)
	waitAgreed(c)
	g := grants(c, live[0]) - p.grants
	t.Logf("after leader change: %v committed probe grants, statuses %v", g, counts)
	if g < 1 || g != 1 && leaderChanges(c) == p.leaders {
		t.Fatalf("probe grants after leader change = %v, want 1", g)
	}
}

// TestMinNodesNeedsFailuresFromDistinctNodes: with min_nodes 2, failures reported by one node only do
// not trip the breaker; one more failure from a second node does.
//
// Five failing calls go through one node. Under -race on a loaded 2-core
// machine not every one is always counted (four of five, seen beside a
// second make test), so what is checked is that the window holds at least
// the three failures that would trip the route, all from that node, and
// the route is still closed; failing calls go on, up to ten, until it does.
func TestMinNodesNeedsFailuresFromDistinctNodes(t *testing.T) {
	t.Parallel()
	const trip = 3 // breakerEdit's failures
	c := newTestClusterWith(t, 3, burstRaft, breakerEdit(20*time.Second, 2))
	setDown(t, c)
	var views []breaker.View
	for n, p := range keysOwnedBy(c, 0, 1000, 10) {
		if a := c.get(0, p, "X-Tenant", "acme"); a.status < 500 {
			t.Fatalf("status %d, want 5xx", a.status)
		}
		if n+1 < 5 {
			continue
		}
		if views = waitAgreed(c); len(views) != 1 || views[0].Failures >= trip {
			break
		}
	}
	if len(views) != 1 || views[0].State != breaker.Closed || views[0].Failures < trip || views[0].Nodes != 1 {
		t.Fatalf("after failures from one node: %+v, want closed with %d or more failures from 1 node", views, trip)
	}
	p := keysOwnedBy(c, 1, 2000, 1)[0]
	if a := c.get(1, p, "X-Tenant", "acme"); a.status < 500 {
		t.Fatalf("status %d, want 5xx", a.status)
	}
	waitAllState(c, breaker.Open)
}

// TestOutageCostsFewLogEntries: an outage under 300 concurrent failing requests
// costs a few log entries: failure reports after the trip are not needed.
func TestOutageCostsFewLogEntries(t *testing.T) {
	t.Parallel()
	c := newTestClusterWith(t, 3, burstRaft, breakerEdit(20*time.Second, 1))
	waitAgreed(c)
	before := c.nodes[0].raft.Node.State().LastIndex
	setDown(t, c)
	counts := burst(c, 300, 1000)
	waitAllState(c, breaker.Open)
	waitAgreed(c)
	cost := c.nodes[0].raft.Node.State().LastIndex - before
	t.Logf("outage: %d log entries for 300 concurrent failing requests (statuses %v, %d upstream calls)",
		cost, counts, c.up.Total())
	if cost >= 30 {
		t.Fatalf("outage cost %d log entries, want < 30", cost)
	}
}

// TestBreakerAdminAndMetricsShowRaftPosition: /-/breakers shows the committed state with its
// Raft position and the local guard; admin POSTs need the token and commit
// cluster-wide; the breaker and Raft series move.
func TestBreakerAdminAndMetricsShowRaftPosition(t *testing.T) {
	t.Parallel()
	c := newTestClusterWith(t, 3, burstRaft, breakerEdit(20*time.Second, 1))
	tests := []struct {
		name, action, token string
		want                int
	}{
		{"open without token", "open", "", http.StatusUnauthorized},
		{"open with wrong token", "open", "nope", http.StatusUnauthorized},
		{"open", "open", adminToken, http.StatusOK},
		{"close", "close", adminToken, http.StatusOK},
		{"open again", "open", adminToken, http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := postAdmin(t, c, 1, "/-/breakers/comments/"+tc.action, tc.token); got != tc.want {
				t.Fatalf("POST %s: %d, want %d", tc.action, got, tc.want)
			}
		})
	}
	waitAllState(c, breaker.Open)
	waitAgreed(c)
	for _, i := range c.running() {
		bv := getBreakers(t, c, i)
		st := c.nodes[i].raft.Node.State()
		switch {
		case bv.State != "open" || !bv.Forced:
			t.Fatalf("node %d: %+v, want forced open", i, bv)
		case bv.Raft == nil || bv.Raft.Term != st.Term || bv.Raft.AppliedIndex == 0 || bv.Raft.CommitIndex < bv.Raft.AppliedIndex:
			t.Fatalf("node %d raft position %+v, raft state %+v", i, bv.Raft, st)
		case bv.LocalGuard == nil || bv.LocalGuard.State != "closed":
			t.Fatalf("node %d local guard %+v, want closed", i, bv.LocalGuard)
		}
		m := c.nodes[i].metrics
		if metrics.Counter(m.BreakerTrans, testRoute, "closed", "open") != 2 ||
			metrics.Counter(m.BreakerTrans, testRoute, "open", "closed") != 1 {
			t.Fatalf("node %d transition counters wrong", i)
		}
	}
	// Node 1 proposed the admin commands, so it timed their commits.
	text := scrape(t, c, 1)
	for _, want := range []string{"levee_raft_leader_changes_total ", "levee_raft_commit_seconds_count ", `levee_breaker_state{route="comments"} 1`} {
		if !strings.Contains(text, want) {
			t.Fatalf("/metrics on node 1 lacks %q", want)
		}
	}
	// Breaker commands are written in the pre-mux format (rolling
	// upgrades); none is rejected.
	for _, want := range []string{"levee_raft_apply_errors_total 0\n", "levee_raft_legacy_entries_total "} {
		if !strings.Contains(text, want) {
			t.Fatalf("/metrics on node 1 lacks %q", want)
		}
	}
	for _, zero := range []string{"levee_raft_commit_seconds_count 0\n", "levee_raft_leader_changes_total 0\n", "levee_raft_legacy_entries_total 0\n"} {
		if strings.Contains(text, zero) {
			t.Fatalf("/metrics on node 1: %q", zero)
		}
	}
}

// postAdmin POSTs an admin command, again while it answers 503 (no
// leader, or a commit not done in time, as in an election on a loaded
// machine: the API says to retry) within ten seconds.
func postAdmin(t *testing.T, c *testCluster, i int, path, token string) int {
	t.Helper()
	var st int
	c.waitFor(10*time.Second, "POST "+path+" answered", func() bool {
		st = postAdminOnce(t, c, i, path, token)
		return st != http.StatusServiceUnavailable
	})
	return st
}

func postAdminOnce(t *testing.T, c *testCluster, i int, path, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url(i, path), nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getBreakers(t *testing.T, c *testCluster, i int) api.BreakerView {
	t.Helper()
	a := c.get(i, "/-/breakers")
	var out []api.BreakerView
	if err := json.Unmarshal(a.body, &out); err != nil || len(out) != 1 {
		t.Fatalf("/-/breakers on node %d: %v: %s", i, err, a.body)
	}
	return out[0]
}

func scrape(t *testing.T, c *testCluster, i int) string {
	t.Helper()
	resp, err := c.client.Get(c.url(i, "/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
