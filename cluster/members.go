package cluster

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// The member table: memberlist's callbacks (membership_delegate.go) record
// each member here and queue its event; Members, Member and Local read it.

// toMember converts a memberlist node; called under memberlist's lock, the
// only time reading the node is race-free.
func (m *Membership) toMember(n *memberlist.Node) (Member, nodeMeta) {
	meta, err := decodeNodeMeta(n.Meta)
	if err != nil {
		m.log.Warn("ignoring peer metadata", "member", n.Name, "err", err)
	}
	return Member{Name: n.Name, GossipAddr: n.Address(), HTTPAddr: meta.HTTPAddr, RaftAddr: meta.RaftAddr, PeerAddr: meta.PeerAddr,
		State: Alive, Bootstrapped: meta.Bootstrapped}, meta
}

func (m *Membership) onJoin(n *memberlist.Node) {
	mem, meta := m.toMember(n)
	m.mu.Lock()
	m.members[mem.Name] = &memberRecord{member: mem, leaving: meta.Leaving}
	m.mu.Unlock()
	m.queue.push(Event{Type: EventJoin, Member: mem})
}

// onUpdate records new metadata. The Leaving flag only primes the table
// for the leave that follows, so it is not reported as an update.
func (m *Membership) onUpdate(n *memberlist.Node) {
	mem, meta := m.toMember(n)
	m.mu.Lock()
	rec := m.members[mem.Name]
	if rec == nil {
		rec = &memberRecord{}
		m.members[mem.Name] = rec
	}
	rec.member, rec.leaving = mem, meta.Leaving
	m.mu.Unlock()
	if !meta.Leaving {
		m.queue.push(Event{Type: EventUpdate, Member: mem})
	}
}

// onLeave classifies the departure: memberlist reports both a graceful
// leave and a failure here without saying which (memberlist#266), so a
// member that gossiped Leaving has left and any other has failed.
func (m *Membership) onLeave(n *memberlist.Node) {
	mem, meta := m.toMember(n)
	m.mu.Lock()
	leaving := meta.Leaving
	if rec := m.members[mem.Name]; rec != nil {
		leaving = leaving || rec.leaving
	}
	ev := Event{Type: EventFail, Member: mem}
	ev.Member.State = Dead
	if leaving {
		ev.Type, ev.Member.State = EventLeave, Left
	}
	m.members[mem.Name] = &memberRecord{member: ev.Member, leaving: leaving, since: time.Now()}
	m.mu.Unlock()
	m.queue.push(ev)
}

// Members returns every known member including this node, sorted by name:
// alive ones and, for DeadRetention, dead and left ones with their state.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.members))
	for _, rec := range m.members {
		out = append(out, rec.member)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Member returns the named member as last known (dead and left ones for
// DeadRetention), and false for a name never seen or already reaped.
func (m *Membership) Member(name string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.members[name]; rec != nil {
		return rec.member, true
	}
	return Member{}, false
}

// Local returns this node as a member. Before Start its GossipAddr is "".
func (m *Membership) Local() Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.members[m.cfg.Name]; rec != nil {
		return rec.member
	}
	return Member{Name: m.cfg.Name, GossipAddr: m.gossip, HTTPAddr: m.cfg.HTTPAddr, RaftAddr: m.cfg.RaftAddr, PeerAddr: m.cfg.PeerAddr,
		State: Alive, Bootstrapped: m.bootstrapped.Load()}
}

// GossipAddr returns the host:port peers reach this node at (the advertised
// address, with the real port when BindAddr asked for port 0); "" before
// Start.
func (m *Membership) GossipAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gossip
}

// Advertise sets the API, Raft and peer addresses gossiped in this node's
// metadata, replacing MembershipConfig's HTTPAddr, RaftAddr and PeerAddr: a node
// learns its bound ports only once it listens, after building its parts.
// It must be called before Start; afterwards it returns
// ErrMembershipStarted. The addresses are checked as NewMembership checks
// the config's.
func (m *Membership) Advertise(httpAddr, raftAddr, peerAddr string) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.started || m.closed {
		return ErrMembershipStarted
	}
	next := m.cfg
	next.HTTPAddr, next.RaftAddr, next.PeerAddr = httpAddr, raftAddr, peerAddr
	if err := next.validateAddrs(); err != nil {
		return err
	}
	m.mu.Lock()
	m.cfg.HTTPAddr, m.cfg.RaftAddr, m.cfg.PeerAddr = httpAddr, raftAddr, peerAddr
	m.mu.Unlock()
	return nil
}
