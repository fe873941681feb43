package consensus

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRecoverLostQuorum: a 3-voter cluster loses n3 for good while stopped,
// so n1 and n2 alone can never elect a leader (2 of 3 is a quorum, but here
// we also prove the rewrite): Recover on n1 and n2 with voters {n1, n2}
// brings back a leader with every committed entry.
func TestRecoverLostQuorum(t *testing.T) {
	c := newCluster(t, clusterOpts{onDisk: true, tune: func(cfg *Config) {
		cfg.Timings = diskTimings()
	}})
	leader := c.formCluster("n1", "n2", "n3")
	for range 3 {
		c.propose(leader, "r=1")
	}
	c.waitReplicated(leader)
	dirs, addrs := map[string]string{}, map[string]string{}
	for _, tn := range c.live() {
		dirs[tn.id], addrs[tn.id] = tn.dir, tn.node.Addr()
		c.stop(tn)
	}
	// Only n1 comes back: one of three voters, no quorum, and it says so.
	lone := c.start("n1", dirs["n1"])
	lone.node.Reconcile([]Peer{{ID: "n1", RaftAddr: lone.node.Addr(), Bootstrapped: true}})
	waitFor(t, 10*time.Second, "no-quorum diagnosis", func() bool {
		return strings.HasPrefix(lone.node.Problem(), "no quorum: 1 of the 3 voters")
	})
	c.stop(lone)

	survivors := []Peer{{ID: "n1", RaftAddr: addrs["n1"]}, {ID: "n2", RaftAddr: addrs["n2"]}}
	for _, id := range []string{"n1", "n2"} {
		cfg := c.config(id, &testNode{dir: dirs[id]})
		if err := Recover(cfg, newTestSM(), survivors); err != nil {
			t.Fatalf("Recover %s: %v", id, err)
		}
	}
	c.start("n1", dirs["n1"])
	c.start("n2", dirs["n2"])
	c.reconcileAll(c.peers())
	leader = c.waitLeader()
	if got := voters(leader); strings.Join(got, ",") != "n1,n2" {
		t.Fatalf("voters after recover = %v, want [n1 n2]", got)
	}
	c.propose(leader, "r=1")
	c.waitReplicated(leader)
	for _, tn := range c.live() {
		if got := tn.sm.count("r"); got != 4 {
			t.Fatalf("%s after recover: r=%d, want 4", tn.id, got)
		}
	}
}

// TestRecoverRefusesARunningNode: the running node holds its bolt lock, so
// Recover fails instead of rewriting state under it.
func TestRecoverRefusesARunningNode(t *testing.T) {
	c := newCluster(t, clusterOpts{onDisk: true, tune: func(cfg *Config) { cfg.BootstrapExpect = 1 }})
	tn := c.start("solo", "")
	err := Recover(c.config("solo", &testNode{dir: tn.dir}), newTestSM(), []Peer{{ID: "solo", RaftAddr: "127.0.0.1:1"}})
	if !errors.Is(err, ErrRecover) {
		t.Fatalf("Recover on a running node = %v, want ErrRecover", err)
	}
}

func TestRecoveryConfiguration(t *testing.T) {
	tests := []struct {
		name    string
		voters  []Peer
		wantErr string
	}{
		{"ok", []Peer{{ID: "a", RaftAddr: "a:1"}, {ID: "b", RaftAddr: "b:1"}}, ""},
		{"self missing", []Peer{{ID: "b", RaftAddr: "b:1"}}, "must include this node"},
		{"duplicate id", []Peer{{ID: "a", RaftAddr: "a:1"}, {ID: "a", RaftAddr: "a:2"}}, "listed twice"},
		{"duplicate address", []Peer{{ID: "a", RaftAddr: "a:1"}, {ID: "b", RaftAddr: "a:1"}}, "listed twice"},
		{"no address", []Peer{{ID: "a"}}, "needs a name and a raft address"},
		{"empty", nil, "must include this node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, err := recoveryConfiguration("a", tt.voters)
			if tt.wantErr == "" {
				if err != nil || len(conf.Servers) != len(tt.voters) {
					t.Fatalf("= %v, %v", conf, err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrRecover) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want ErrRecover mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestDiagnoseNoLeader(t *testing.T) {
	alivePeers := func(ids ...string) []Peer { return alive(ids...) }
	tests := []struct {
		name   string
		voters []string
		peers  []Peer
		want   string
	}{
		{"not a voter", []string{"b", "c"}, alivePeers("a", "b", "c"), "this node is not a voter"},
		{"no quorum", []string{"a", "b", "c"}, alivePeers("a"), "no quorum: 1 of the 3 voters"},
		{"dead peers do not count", []string{"a", "b", "c"},
			append(alivePeers("a"), Peer{ID: "b", Status: PeerDead}, Peer{ID: "c", Status: PeerLeft}), "not reachable: b, c"},
		{"quorum alive: election", []string{"a", "b", "c"}, alivePeers("a", "b"), "election in progress (term 7) with 2 of 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diagnose("a", tt.voters, tt.peers, 7); !strings.Contains(got, tt.want) {
				t.Fatalf("diagnose = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

// TestAdoptMakesStoredStateThisNodesAlone: a node whose Config.Adopt
// accepts the voters found on disk (here another name's one-voter state)
// starts as the only voter of that state, every committed entry kept, and
// leads; Adopt is asked with the stored voters, and without state with
// none. Refused, the state is taken as it is: this node is no voter in it.
func TestAdoptMakesStoredStateThisNodesAlone(t *testing.T) {
	for _, adopt := range []bool{true, false} {
		t.Run(map[bool]string{true: "adopted", false: "refused"}[adopt], func(t *testing.T) {
			dir := stoppedState(t, true) // "solo", 4 entries, one of them after a snapshot
			c := newCluster(t, clusterOpts{onDisk: true, tune: func(cfg *Config) { cfg.BootstrapExpect = 1 }})
			var asked []Peer
			cfg := c.config("heir", &testNode{dir: dir})
			cfg.Adopt = func(stored []Peer) bool { asked = stored; return adopt }
			sm := newTestSM()
			n, err := New(cfg, sm)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = n.Close() })
			if err := n.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0].ID != "solo" {
				t.Fatalf("Adopt asked with %v, want the stored voter solo", asked)
			}
			if !adopt {
				if got := n.State().Voters; len(got) != 1 || got[0] != "solo" {
					t.Fatalf("voters %v after a refused adoption, want [solo]", got)
				}
				return
			}
			waitFor(t, 10*time.Second, "the adopting node to lead", n.IsLeader)
			if got := n.State().Voters; len(got) != 1 || got[0] != "heir" {
				t.Fatalf("voters %v, want [heir]", got)
			}
			if got := sm.count("r"); got != 4 {
				t.Fatalf("r = %d after adopting, want the 4 committed entries", got)
			}
		})
	}
}
