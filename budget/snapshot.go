package budget

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadSnapshot wraps every error from Table.Restore.
var ErrBadSnapshot = errors.New("budget: bad snapshot")

// snapshot is the Table in name order, hosts and nodes alike, so that
// equal tables give equal bytes.
type snapshot struct {
	V     uint8       `msgpack:"v"`
	Hosts []hostEntry `msgpack:"hosts"`
}

type hostEntry struct {
	Key   string  `msgpack:"key"`
	State *host   `msgpack:"state"`
	Nodes []*node `msgpack:"nodes"`
}

// Snapshot encodes the table; empty when no host has a budget.
func (t *Table) Snapshot() ([]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.hosts) == 0 {
		return nil, nil
	}
	s := snapshot{V: CommandVersion}
	for _, key := range slices.Sorted(maps.Keys(t.hosts)) {
		h := t.hosts[key]
		e := hostEntry{Key: key, State: h}
		for _, name := range slices.Sorted(maps.Keys(h.Nodes)) {
			n := *h.Nodes[name]
			n.Name = name
			e.Nodes = append(e.Nodes, &n)
		}
		s.Hosts = append(s.Hosts, e)
	}
	return msgpack.Marshal(&s)
}

// Restore replaces the table with a snapshot's; empty bytes empty it.
func (t *Table) Restore(b []byte) error {
	hosts := map[string]*host{}
	if len(b) > 0 {
		var s snapshot
		if err := msgpack.NewDecoder(bytes.NewReader(b)).Decode(&s); err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		var err error
		if hosts, err = s.tables(); err != nil {
			return err
		}
	}
	t.mu.Lock()
	t.hosts = hosts
	t.mu.Unlock()
	return nil
}

// tables rebuilds the Table's maps from a snapshot, refusing one no
// Apply could have made.
func (s *snapshot) tables() (map[string]*host, error) {
	if s.V != CommandVersion || len(s.Hosts) > maxHosts {
		return nil, fmt.Errorf("%w: version %d, %d hosts", ErrBadSnapshot, s.V, len(s.Hosts))
	}
	hosts := make(map[string]*host, len(s.Hosts))
	for _, e := range s.Hosts {
		h := e.State
		if h == nil || e.Key == "" || len(e.Key) > MaxHostLen || hosts[e.Key] != nil || len(e.Nodes) > maxNodes ||
			bad(h.Limit) || bad(h.LossAt) || bad(h.From) || bad(h.Floor) {
			return nil, fmt.Errorf("%w: host %.40q", ErrBadSnapshot, e.Key)
		}
		h.Nodes = make(map[string]*node, len(e.Nodes))
		for _, n := range e.Nodes {
			if n == nil || n.Name == "" || h.Nodes[n.Name] != nil || bad(n.Sent) || bad(n.Lost) || bad(n.Want) || bad(n.Lease) {
				return nil, fmt.Errorf("%w: host %.40q: a node", ErrBadSnapshot, e.Key)
			}
			h.Nodes[n.Name], n.Name = n, ""
		}
		hosts[e.Key] = h
	}
	return hosts, nil
}

func bad(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
