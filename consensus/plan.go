package consensus

import (
	"cmp"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// This file holds the pure decisions behind Reconcile, so they can be tested
// and fuzzed without a cluster.

// planBootstrap decides whether self bootstraps the cluster and with which
// voters. It follows consul's bootstrap_expect: wait for expect alive peers
// with raft addresses, never bootstrap when any alive peer already has Raft
// state, and let exactly one node act — the smallest ID among the first
// expect alive peers sorted by ID — so two nodes can never bootstrap two
// different clusters from the same view.
func planBootstrap(self string, peers []Peer, expect int) (raft.Configuration, bool) {
	var alive []Peer
	for _, p := range dedupePeers(peers) {
		if p.Status != PeerAlive || p.RaftAddr == "" {
			continue
		}
		if p.Bootstrapped && p.ID != self {
			return raft.Configuration{}, false
		}
		alive = append(alive, p)
	}
	if expect < 1 || len(alive) < expect {
		return raft.Configuration{}, false
	}
	// dedupePeers sorted by ID, so alive is sorted too.
	chosen := alive[:expect]
	if chosen[0].ID != self {
		return raft.Configuration{}, false
	}
	servers := make([]raft.Server, 0, expect)
	for _, p := range chosen {
		servers = append(servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(p.ID),
			Address:  raft.ServerAddress(p.RaftAddr),
		})
	}
	return raft.Configuration{Servers: servers}, true
}

// dedupePeers drops peers without an ID, keeps the last entry per ID and
// returns them sorted by ID.
func dedupePeers(peers []Peer) []Peer {
	byID := make(map[string]Peer, len(peers))
	for _, p := range peers {
		if p.ID != "" {
			byID[p.ID] = p
		}
	}
	out := make([]Peer, 0, len(byID))
	for _, p := range byID {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

type changeKind int

const (
	changeAddVoter changeKind = iota + 1
	changeRemove
)

// change is one configuration change the leader should make.
type change struct {
	kind   changeKind
	id     string
	addr   string
	reason string
}

// memberView is the input of planMembership.
type memberView struct {
	self      string        // the leader's ID; never removed
	servers   []raft.Server // current (latest) Raft configuration
	peers     []Peer        // gossip view
	now       time.Time
	deadAfter time.Duration
	minVoters int  // gone peers are not removed below this many voters
	reap      bool // the leader is stable enough to remove gone peers
	// rewriteAddrs re-adds a voter whose address changed. Off with the TCP
	// transport, whose address book (addrbook.go) already routes every RPC
	// by server ID to the address gossip reports: rewriting the address in
	// the configuration races inside hashicorp/raft v1.8.0, where
	// startStopReplication updates a follower's peer while its replication
	// goroutine reads it (hashicorp/raft#471, #681; the race detector
	// caught it in a restart test). On for injected transports, which have
	// no address book.
	rewriteAddrs bool
	// held are peers removed on request a moment ago (RemoveLocal), not
	// re-added while gossip still shows them alive: `levee leave` removes
	// the seat first and leaves gossip after, and in between the node
	// would otherwise be added straight back (see removalHolds).
	held map[string]bool
}

// planMembership lists the changes that bring the configuration in line
// with gossip: additions first (they only add capacity), then removals.
func planMembership(v memberView) []change {
	peers := dedupePeers(v.peers)
	return append(planAdds(v, peers), planRemovals(v, peers)...)
}

// planAdds adds alive peers that are missing or not voters, and, with
// rewriteAddrs, those configured at a different address (AddVoter on an
// existing ID rewrites its address).
func planAdds(v memberView, peers []Peer) []change {
	inConfig := make(map[string]raft.Server, len(v.servers))
	for _, s := range v.servers {
		inConfig[string(s.ID)] = s
	}
	var out []change
	for _, p := range peers {
		if p.Status != PeerAlive || p.RaftAddr == "" || p.ID == v.self {
			continue
		}
		s, ok := inConfig[p.ID]
		switch {
		case !ok && v.held[p.ID]:
		case !ok:
			out = append(out, change{changeAddVoter, p.ID, p.RaftAddr, "new alive member"})
		case s.Suffrage != raft.Voter:
			out = append(out, change{changeAddVoter, p.ID, p.RaftAddr, "promote to voter"})
		case v.rewriteAddrs && string(s.Address) != p.RaftAddr:
			out = append(out, change{changeAddVoter, p.ID, p.RaftAddr, "address changed"})
		}
	}
	return out
}

// planRemovals removes peers gone from gossip (dead, or stopped with a
// gossip leave) for longer than deadAfter, longest gone first, and only
// when v.reap says the leader has been stable for a while.
//
// A gossip leave is NOT a Raft leave: SIGTERM announces it so peers stop
// routing to the node, but the node keeps its Raft seat, because a whole
// cluster stopping at once would otherwise race its removals into
// configurations no majority agrees on (Consul keeps servers' seats on
// terminate for the same reason: leave_on_terminate is false for servers).
// A permanent removal is explicit (Node.RemoveServer, `levee leave`).
//
// Like Consul's autopilot (CleanupDeadServers) it never removes the leader,
// caps voter removals per pass at (voters-1)/2 so the voters that remain
// are a quorum of the current configuration and can commit each change,
// and keeps voters at minVoters or more, so a designed-for-N cluster keeps
// its size until the dead node is replaced.
func planRemovals(v memberView, peers []Peer) []change {
	if !v.reap {
		return nil
	}
	suffrage := make(map[string]raft.ServerSuffrage, len(v.servers))
	voters := 0
	for _, s := range v.servers {
		suffrage[string(s.ID)] = s.Suffrage
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	budget := (voters - 1) / 2
	var out []change
	for _, p := range goneCandidates(v, peers, suffrage) {
		if suffrage[p.ID] == raft.Voter {
			if budget <= 0 || voters-1 < max(v.minVoters, 1) {
				continue
			}
			budget--
			voters--
		}
		out = append(out, change{changeRemove, p.ID, p.RaftAddr, "gone from gossip (" + p.Status.String() + ") longer than dead_after"})
	}
	return out
}

// goneCandidates returns configured, non-leader peers that have been dead
// or left for longer than deadAfter, longest gone first.
func goneCandidates(v memberView, peers []Peer, suffrage map[string]raft.ServerSuffrage) []Peer {
	var gone []Peer
	for _, p := range peers {
		if _, ok := suffrage[p.ID]; !ok || p.ID == v.self {
			continue
		}
		if (p.Status == PeerLeft || p.Status == PeerDead) && v.now.Sub(p.Since) > v.deadAfter {
			gone = append(gone, p)
		}
	}
	slices.SortStableFunc(gone, func(a, b Peer) int { return a.Since.Compare(b.Since) })
	return gone
}

// removeHold bounds how long a peer removed on request is held out of the
// configuration while gossip still shows it alive: long enough for its
// own gossip leave to spread, short enough that a node removed and started
// again soon after is taken back.
const removeHold = 30 * time.Second

// removalHolds is memberView.held from the removals made on request
// (removed: id → when) as of now: a removal is forgotten once gossip shows
// the peer gone (a later return is a new member) or after removeHold.
// Forgotten entries are deleted from removed.
func removalHolds(removed map[string]time.Time, peers []Peer, now time.Time) map[string]bool {
	gone := map[string]bool{}
	for _, p := range peers {
		if p.Status != PeerAlive {
			gone[p.ID] = true
		}
	}
	held := map[string]bool{}
	for id, at := range removed {
		if gone[id] || now.Sub(at) > removeHold {
			delete(removed, id)
			continue
		}
		held[id] = true
	}
	return held
}
