package node

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestOperatorSeriesFollowTheCluster: the series the shipped alerts read
// (deploy/prometheus/alerts.yml) say what the cluster does: a leader and a
// quorum on every node, three voters, then a crashed member counted dead.
func TestOperatorSeriesFollowTheCluster(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	// A follower may not have heard the leader yet when the cluster has
	// converged (a loaded machine): wait for the leader series, then read.
	c.waitFor(20*time.Second, "every node to know a leader and a quorum", func() bool {
		for _, i := range c.running() {
			body := scrapeNode(t, c.nodes[i])
			if sampleValue(t, body, "levee_raft_has_leader") != 1 || sampleValue(t, body, "levee_raft_quorum_ok") != 1 {
				return false
			}
		}
		return true
	})
	for _, i := range c.running() {
		body := scrapeNode(t, c.nodes[i])
		for series, want := range map[string]float64{
			"levee_raft_voters":                    3,
			`levee_cluster_members{state="alive"}`: 3, `levee_cluster_members{state="dead"}`: 0,
			`levee_cluster_members{state="suspect"}`: 0, `levee_cluster_members{state="left"}`: 0,
		} {
			if got := sampleValue(t, body, series); got != want {
				t.Errorf("node %d: %s = %v, want %v", i, series, got, want)
			}
		}
		if term := sampleValue(t, body, "levee_raft_term"); term < 1 {
			t.Errorf("node %d: levee_raft_term = %v, want >= 1", i, term)
		}
		if lag := sampleValue(t, body, "levee_raft_commit_lag"); lag < 0 {
			t.Errorf("node %d: levee_raft_commit_lag = %v", i, lag)
		}
	}

	c.crash(2)
	c.waitFor(20*time.Second, "node 1 to count n3 dead", func() bool {
		body := scrapeNode(t, c.nodes[0])
		return sampleValue(t, body, `levee_cluster_members{state="dead"}`) == 1 &&
			sampleValue(t, body, `levee_cluster_members{state="alive"}`) == 2
	})
	c.waitFor(20*time.Second, "a leader and a quorum among the two left", func() bool {
		for _, i := range c.running() {
			body := scrapeNode(t, c.nodes[i])
			if sampleValue(t, body, "levee_raft_has_leader") != 1 || sampleValue(t, body, "levee_raft_quorum_ok") != 1 {
				return false
			}
		}
		return true
	})
}

// sampleValue reads one sample, named with its labels as the text format
// writes them, from a scrape; -1 when it is absent.
func sampleValue(t *testing.T, body, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}
