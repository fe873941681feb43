package consensus

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func alive(ids ...string) []Peer {
	var out []Peer
	for _, id := range ids {
		out = append(out, Peer{ID: id, RaftAddr: id + ":7000", Status: PeerAlive})
	}
	return out
}

func TestPlanBootstrap(t *testing.T) {
	withState := alive("a", "b", "c")
	withState[2].Bootstrapped = true
	noAddr := alive("a", "b", "c")
	noAddr[1].RaftAddr = ""
	dead := alive("a", "b", "c")
	dead[0].Status = PeerDead
	tests := []struct {
		name   string
		self   string
		peers  []Peer
		expect int
		want   []string // voters; nil = no bootstrap
	}{
		{"smallest of expected bootstraps", "a", alive("c", "a", "b"), 3, []string{"a", "b", "c"}},
		{"others wait", "b", alive("a", "b", "c"), 3, nil},
		{"too few", "a", alive("a", "b"), 3, nil},
		{"only the first expect become voters", "a", alive("a", "b", "c", "d"), 3, []string{"a", "b", "c"}},
		{"self outside the first expect", "d", alive("a", "b", "c", "d"), 3, nil},
		{"single node", "a", alive("a"), 1, []string{"a"}},
		{"peer with state disables bootstrap", "a", withState, 3, nil},
		{"peer without raft addr does not count", "a", noAddr, 3, nil},
		{"dead smallest: next alive leads", "b", append(dead, alive("d")...), 3, []string{"b", "c", "d"}},
		{"duplicates count once", "a", append(alive("a", "b"), alive("b")...), 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, ok := planBootstrap(tt.self, tt.peers, tt.expect)
			if ok != (tt.want != nil) {
				t.Fatalf("bootstrap = %v, want %v", ok, tt.want != nil)
			}
			if got := serverIDs(conf.Servers); ok && !slices.Equal(got, tt.want) {
				t.Fatalf("voters = %v, want %v", got, tt.want)
			}
		})
	}
}

func config(ids ...string) []raft.Server {
	var out []raft.Server
	for _, id := range ids {
		out = append(out, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":7000")})
	}
	return out
}

func TestPlanMembership(t *testing.T) {
	now := time.Now()
	long, recent := now.Add(-time.Hour), now.Add(-time.Second)
	with := func(peers []Peer, id string, st PeerStatus, since time.Time) []Peer {
		peers = slices.Clone(peers)
		for i := range peers {
			if peers[i].ID == id {
				peers[i].Status, peers[i].Since = st, since
			}
		}
		return peers
	}
	moved := alive("a", "b", "c")
	moved[2].RaftAddr = "c:7001"
	tests := []struct {
		name      string
		servers   []raft.Server
		peers     []Peer
		minVoters int
		want      []string // "+id" add, "-id" remove
	}{
		{"steady", config("a", "b", "c"), alive("a", "b", "c"), 3, nil},
		{"new alive added", config("a", "b", "c"), alive("a", "b", "c", "d"), 3, []string{"+d"}},
		{"address change left to the address book", config("a", "b", "c"), moved, 3, nil},
		{"stopped (left) recently keeps its seat", config("a", "b", "c", "d"), with(alive("a", "b", "c", "d"), "d", PeerLeft, now), 3, nil},
		{"every follower stopped at once keeps its seat", config("a", "b", "c"),
			with(with(alive("a", "b", "c"), "b", PeerLeft, now), "c", PeerLeft, now), 1, nil},
		{"left long ago removed like dead", config("a", "b", "c", "d"), with(alive("a", "b", "c", "d"), "d", PeerLeft, long), 3, []string{"-d"}},
		{"left long ago kept at MinVoters", config("a", "b", "c"), with(alive("a", "b", "c"), "c", PeerLeft, long), 3, nil},
		{"dead long removed", config("a", "b", "c", "d"), with(alive("a", "b", "c", "d"), "d", PeerDead, long), 3, []string{"-d"}},
		{"dead recently kept", config("a", "b", "c", "d"), with(alive("a", "b", "c", "d"), "d", PeerDead, recent), 3, nil},
		{"dead kept at MinVoters", config("a", "b", "c"), with(alive("a", "b", "c"), "c", PeerDead, long), 3, nil},
		{"self never removed", config("a", "b", "c"), with(alive("a", "b", "c"), "a", PeerLeft, long), 1, nil},
		{"quorum cap: 2 of 5 dead both go", config("a", "b", "c", "d", "e"),
			with(with(alive("a", "b", "c", "d", "e"), "d", PeerDead, long), "e", PeerDead, long), 1, []string{"-d", "-e"}},
		{"quorum cap: 3 of 5 dead, only 2 go", config("a", "b", "c", "d", "e"),
			with(with(with(alive("a", "b", "c", "d", "e"), "c", PeerDead, long.Add(-time.Hour)), "d", PeerDead, long), "e", PeerDead, long), 1,
			[]string{"-c", "-d"}},
		{"unknown peer not removed", config("a", "b", "c"), with(alive("a", "b", "c", "z"), "z", PeerLeft, long), 1, nil},
		{"unstable leader removes nothing", config("a", "b", "c", "d"), with(alive("a", "b", "c", "d"), "d", PeerDead, long), -1, nil},
		{"unstable leader still adds", config("a", "b", "c"), alive("a", "b", "c", "d"), -1, []string{"+d"}},
	}
	t.Run("address change re-added without an address book", func(t *testing.T) {
		got := describe(planMembership(memberView{self: "a", servers: config("a", "b", "c"), peers: moved,
			now: now, deadAfter: time.Minute, minVoters: 3, reap: true, rewriteAddrs: true}))
		if !slices.Equal(got, []string{"+c"}) {
			t.Fatalf("plan = %v, want [+c]", got)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// minVoters -1 stands for a leader not yet stable: reap off.
			got := describe(planMembership(memberView{self: "a", servers: tt.servers, peers: tt.peers,
				now: now, deadAfter: time.Minute, minVoters: max(tt.minVoters, 3), reap: tt.minVoters >= 0}))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("plan = %v, want %v", got, tt.want)
			}
		})
	}
}

func describe(changes []change) []string {
	var out []string
	for _, c := range changes {
		op := "+"
		if c.kind == changeRemove {
			op = "-"
		}
		out = append(out, op+c.id)
	}
	return out
}

// decodeView turns fuzz bytes into a configuration and a gossip view over
// nodes n0..n7: per node one byte (bit0 in config, bit1 voter, bits2-3
// status, bit4 long dead, bit5 has raft addr).
func decodeView(data []byte) ([]raft.Server, []Peer, int) {
	now := time.Unix(1_000_000, 0)
	var servers []raft.Server
	var peers []Peer
	minVoters := 1
	if len(data) > 0 {
		minVoters = int(data[0]%5) + 1
		data = data[1:]
	}
	for i, b := range data[:min(len(data), 8)] {
		id := fmt.Sprintf("n%d", i)
		if b&1 != 0 {
			suff := raft.Nonvoter
			if b&2 != 0 {
				suff = raft.Voter
			}
			servers = append(servers, raft.Server{Suffrage: suff, ID: raft.ServerID(id), Address: raft.ServerAddress(id)})
		}
		p := Peer{ID: id, Status: PeerStatus(b >> 2 & 3), Since: now}
		if b&16 != 0 {
			p.Since = now.Add(-time.Hour)
		}
		if b&32 != 0 {
			p.RaftAddr = id
		}
		peers = append(peers, p)
	}
	return servers, peers, minVoters
}

func FuzzPlanMembership(f *testing.F) {
	f.Add([]byte{3, 3, 3, 3, 3 | 12 | 16 | 32})
	f.Add([]byte{1, 3, 3 | 8 | 32, 3 | 12 | 16 | 32, 3 | 12 | 16, 3 | 12 | 16, 32})
	f.Add(binary.BigEndian.AppendUint64([]byte{2}, 0xffeeddccbbaa9988))
	f.Fuzz(func(t *testing.T, data []byte) {
		servers, peers, minVoters := decodeView(data)
		if len(servers) == 0 {
			return
		}
		self := string(servers[0].ID) // the leader is in its own configuration
		reap := len(data)%2 == 0
		plan := planMembership(memberView{self: self, servers: servers, peers: peers,
			now: time.Unix(1_000_000, 0), deadAfter: time.Minute, minVoters: minVoters, reap: reap})
		checkPlan(t, self, servers, peers, minVoters, reap, plan)
	})
}

// checkPlan asserts the invariants of planMembership.
func checkPlan(t *testing.T, self string, servers []raft.Server, peers []Peer, minVoters int, reap bool, plan []change) {
	t.Helper()
	voters, suff := 0, map[string]raft.ServerSuffrage{}
	for _, s := range servers {
		suff[string(s.ID)] = s.Suffrage
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	status, since := map[string]PeerStatus{}, map[string]time.Time{}
	for _, p := range peers {
		status[p.ID], since[p.ID] = p.Status, p.Since
	}
	removedVoters := 0
	for _, c := range plan {
		if c.id == self {
			t.Fatalf("plan touches the leader: %+v", c)
		}
		switch c.kind {
		case changeAddVoter:
			if status[c.id] != PeerAlive || c.addr == "" {
				t.Fatalf("adds a non-alive peer: %+v", c)
			}
		case changeRemove:
			s, ok := suff[c.id]
			switch {
			case !ok:
				t.Fatalf("removes a server not in the configuration: %+v", c)
			case !reap:
				t.Fatalf("removes %+v while the leader is not stable", c)
			case status[c.id] != PeerDead && status[c.id] != PeerLeft:
				t.Fatalf("removes a %s peer: %+v", status[c.id], c)
			case time.Unix(1_000_000, 0).Sub(since[c.id]) <= time.Minute:
				t.Fatalf("removes a peer gone for less than deadAfter: %+v", c)
			}
			if s == raft.Voter {
				removedVoters++
			}
		}
	}
	if removedVoters > (voters-1)/2 {
		t.Fatalf("removes %d of %d voters: quorum lost", removedVoters, voters)
	}
	if removedVoters > 0 && voters-removedVoters < minVoters {
		t.Fatalf("removals leave %d voters, MinVoters %d", voters-removedVoters, minVoters)
	}
}

// FuzzPlanBootstrap checks that, for any view shared by all nodes, at most
// one node decides to bootstrap, with exactly expect alive voters.
func FuzzPlanBootstrap(f *testing.F) {
	f.Add([]byte{3, 32, 32, 32})
	f.Add([]byte{2, 32, 0, 32 | 4, 32})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, peers, expect := decodeView(data)
		deciders := 0
		for _, p := range peers {
			conf, ok := planBootstrap(p.ID, peers, expect)
			if !ok {
				continue
			}
			deciders++
			if len(conf.Servers) != expect || string(conf.Servers[0].ID) != p.ID {
				t.Fatalf("%s bootstraps with %v (expect %d)", p.ID, conf.Servers, expect)
			}
		}
		if deciders > 1 {
			t.Fatalf("%d nodes would bootstrap", deciders)
		}
	})
}

// TestAPeerRemovedOnRequestIsNotAddedBackWhileGossipStillShowsIt: `levee
// leave` removes the seat before the node leaves gossip; in between, the
// leader does not add it back. Once gossip shows it gone, or after
// removeHold, the hold is forgotten and a node alive again is added.
func TestAPeerRemovedOnRequestIsNotAddedBackWhileGossipStillShowsIt(t *testing.T) {
	now := time.Now()
	left := alive("a", "b", "c")
	left[2].Status, left[2].Since = PeerLeft, now
	for _, tt := range []struct {
		name     string
		removed  time.Time
		peers    []Peer
		wantHeld bool
		want     []string
	}{
		{"just removed, still alive in gossip", now.Add(-time.Second), alive("a", "b", "c"), true, nil},
		{"held past removeHold", now.Add(-removeHold - time.Second), alive("a", "b", "c"), false, []string{"+c"}},
		{"seen gone in gossip", now.Add(-time.Second), left, false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			removed := map[string]time.Time{"c": tt.removed}
			held := removalHolds(removed, tt.peers, now)
			if held["c"] != tt.wantHeld || (len(removed) == 1) != tt.wantHeld {
				t.Fatalf("held %v, remembered %v; want held %v", held, removed, tt.wantHeld)
			}
			got := describe(planMembership(memberView{self: "a", servers: config("a", "b"), peers: tt.peers,
				now: now, deadAfter: time.Minute, minVoters: 1, reap: true, held: held}))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("plan = %v, want %v", got, tt.want)
			}
		})
	}
}
