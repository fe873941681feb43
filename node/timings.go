package node

import (
	"github.com/levee/levee/control"
	"github.com/levee/levee/mesh"
)

// Timings are how fast a node detects failures and spreads state. They are
// not in the config file: the defaults suit a LAN, and tests shorten them
// (as hashicorp/raft's testing.go inmemConfig does). Each part documents
// its own, with its default: a zero field takes it.
type Timings struct {
	// GossipTimings are the mesh's: gossip's failure detection and the
	// handoff of entries a member lacks.
	mesh.GossipTimings
	// RaftTimings are the control plane's (or the Solo's): Raft's
	// timeouts, reconcile and contact limit, the poll that gossips Raft
	// state, and the breaker's catch-up grace after a restart.
	control.RaftTimings
}
