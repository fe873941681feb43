package node

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
)

// commitCount is node i's levee_raft_commit_seconds sample count.
func commitCount(t *testing.T, c *testCluster, i int) uint64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(scrape(t, c, i)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "levee_raft_commit_seconds_count "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("commit count %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("/metrics lacks levee_raft_commit_seconds_count")
	return 0
}

// TestLeaderTimesForwardedCommits: a breaker command proposed on a
// follower is timed on the follower (end to end) and on the leader (its
// local commit), although the leader proposed nothing itself.
func TestLeaderTimesForwardedCommits(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	for attempt := 1; ; attempt++ {
		leader := leaderIndex(c)
		follower := (leader + 1) % 3
		leaderBefore, followerBefore := commitCount(t, c, leader), commitCount(t, c, follower)
		proposals := c.nodes[leader].raft.Node.Stats().Proposals
		cmd := breaker.Command{V: breaker.CommandVersion, Op: breaker.OpForceClose, Route: testRoute,
			Node: c.cfgs[follower].Node.Name, At: time.Now().UnixNano()}
		if _, err := c.nodes[follower].raft.Proposer.Propose(t.Context(), cmd); err != nil {
			t.Fatalf("propose on follower: %v", err)
		}
		if !c.nodes[leader].raft.Node.IsLeader() && attempt < 3 {
			continue // an election under load moved the commit elsewhere
		}
		if got := c.nodes[leader].raft.Node.Stats().Proposals; got != proposals {
			t.Fatalf("leader proposed %d commands itself; the test needs it idle", got-proposals)
		}
		if got := commitCount(t, c, leader); got != leaderBefore+1 {
			t.Errorf("leader commit samples %d -> %d, want one more for the forwarded command", leaderBefore, got)
		}
		if got := commitCount(t, c, follower); got != followerBefore+1 {
			t.Errorf("follower commit samples %d -> %d, want one more", followerBefore, got)
		}
		return
	}
}
