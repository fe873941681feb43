package cluster

// MemberStatus is one member as /-/cluster shows it (its JSON names are
// part of the HTTP contract).
type MemberStatus struct {
	Name   string  `json:"name"`
	State  string  `json:"state"`
	HTTP   string  `json:"http"`
	Gossip string  `json:"gossip"`
	Raft   string  `json:"raft,omitempty"`
	Share  float64 `json:"ring_share"`
}

// Statuses describes members (Members' order, by name) with each one's
// share of the ring.
func Statuses(members []Member, shares map[string]float64) []MemberStatus {
	out := make([]MemberStatus, 0, len(members))
	for _, m := range members {
		out = append(out, MemberStatus{Name: m.Name, State: m.State.String(), HTTP: m.HTTPAddr,
			Gossip: m.GossipAddr, Raft: m.RaftAddr, Share: shares[m.Name]})
	}
	return out
}
