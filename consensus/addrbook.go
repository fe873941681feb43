package consensus

import (
	"errors"
	"sync"

	"github.com/hashicorp/raft"
)

// errUnknownPeer makes the TCP transport fall back to the address stored in
// the Raft configuration.
var errUnknownPeer = errors.New("consensus: no gossip address for peer")

// addrBook maps server IDs to the Raft addresses gossip last reported. It is
// the transport's raft.ServerAddressProvider: nodes restarted on a new
// address (docker, port 0) stay reachable by ID, as in consul.
type addrBook struct {
	mu    sync.RWMutex
	addrs map[raft.ServerID]raft.ServerAddress
}

func newAddrBook() *addrBook {
	return &addrBook{addrs: make(map[raft.ServerID]raft.ServerAddress)}
}

// ServerAddr implements raft.ServerAddressProvider.
func (b *addrBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	addr, ok := b.addrs[id]
	if !ok {
		return "", errUnknownPeer
	}
	return addr, nil
}

// update records the address of every reachable peer; left and dead peers
// keep their last known address.
func (b *addrBook) update(peers []Peer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range peers {
		if p.RaftAddr == "" || (p.Status != PeerAlive && p.Status != PeerSuspect) {
			continue
		}
		b.addrs[raft.ServerID(p.ID)] = raft.ServerAddress(p.RaftAddr)
	}
}
