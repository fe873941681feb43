package ring

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// Sentinel errors returned (wrapped) by this package.
var (
	// ErrInvalidConfig reports a Config that Validate rejects.
	ErrInvalidConfig = errors.New("ring: invalid config")
	// ErrEmptyName reports a member with an empty name.
	ErrEmptyName = errors.New("ring: empty member name")
	// ErrTooManyMembers reports an Add that would leave fewer than one
	// partition per member, which the bounded-load algorithm cannot place.
	ErrTooManyMembers = errors.New("ring: more members than partitions")
)

// MaxPartitions bounds Config.Partitions: every membership change walks all
// partitions, and the partition table is held in memory. config validates
// cluster.partitions with it.
const MaxPartitions = 1 << 16

// Config tunes the ring. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Partitions is the fixed number of partitions keys hash into; each
	// partition has exactly one owner. A prime spreads keys evenly. It also
	// caps the member count. Default 271. Range 1..65536.
	Partitions int
	// ReplicationFactor is the number of virtual nodes per member on the
	// hash circle; more virtual nodes even out the shares. Default 20,
	// minimum 2 (with one virtual node the bounded-load walk can miss a
	// member and the library panics).
	ReplicationFactor int
	// Load is the bounded-load factor: no member owns more than
	// ceil(Load × Partitions/members) partitions. Must be > 1. Default 1.25.
	Load float64
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Partitions: 271, ReplicationFactor: 20, Load: 1.25}
}

// Validate reports whether the config can place partitions for any member
// count from 1 to Partitions without the library panicking.
func (c Config) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return fmt.Errorf("%w: Partitions %d not in 1..%d", ErrInvalidConfig, c.Partitions, MaxPartitions)
	case c.ReplicationFactor < 2:
		return fmt.Errorf("%w: ReplicationFactor %d < 2", ErrInvalidConfig, c.ReplicationFactor)
	// Load > 1 keeps ceil(P/m × Load) above P/m for every member count m ≤
	// P (the float product never rounds back down to P/m), so the members
	// always have room for every partition and the library cannot panic.
	case math.IsNaN(c.Load) || math.IsInf(c.Load, 0) || c.Load <= 1:
		return fmt.Errorf("%w: Load %v must be a finite number > 1", ErrInvalidConfig, c.Load)
	}
	return nil
}

// member is what the consistent library stores. Its String is the name
// with a length prefix because the library derives virtual-node keys as
// String()+index: raw names "n1" and "n11" would both produce "n112",
// collide on the circle, and make Remove panic on a dangling entry.
type member struct{ name string }

func (m member) String() string { return strconv.Itoa(len(m.name)) + ":" + m.name }

// hasher adapts xxhash to consistent.Hasher.
type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// Ring is a consistent-hash ring of member names. It is safe for concurrent
// use: queries share a read lock, Add and Remove take the write lock so a
// lookup never observes a half-redistributed partition table.
type Ring struct {
	cfg     Config
	mu      sync.RWMutex
	members map[string]struct{}
	c       *consistent.Consistent

	succMu sync.Mutex                        // guards succ
	succ   map[string]*consistent.Consistent // layouts without some members, see without
}

// New returns a ring holding the given members (duplicates are ignored).
func New(cfg Config, members ...string) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	set := make(map[string]struct{}, len(members))
	list := make([]consistent.Member, 0, len(members))
	for _, name := range members {
		if err := checkName(name); err != nil {
			return nil, err
		}
		if _, dup := set[name]; !dup {
			set[name] = struct{}{}
			list = append(list, member{name})
		}
	}
	if len(set) > cfg.Partitions {
		return nil, fmt.Errorf("%w: %d members, %d partitions", ErrTooManyMembers, len(set), cfg.Partitions)
	}
	if len(list) == 0 {
		// consistent.New distributes partitions for any non-nil slice, and
		// with no members that walk panics.
		list = nil
	}
	c := consistent.New(list, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
	})
	return &Ring{cfg: cfg, members: set, c: c}, nil
}

func checkName(name string) error {
	if name == "" {
		return ErrEmptyName
	}
	return nil
}

// Add puts a member on the ring. Adding a present member is a no-op.
func (r *Ring) Add(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.members[name]; ok {
		return nil
	}
	if len(r.members) >= r.cfg.Partitions {
		return fmt.Errorf("%w: adding %q to %d members, %d partitions", ErrTooManyMembers, name, len(r.members), r.cfg.Partitions)
	}
	r.members[name] = struct{}{}
	r.c.Add(member{name})
	r.succ = nil
	return nil
}

// Remove takes a member off the ring. Removing an absent member is a no-op.
func (r *Ring) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.members[name]; !ok {
		return
	}
	delete(r.members, name)
	r.c.Remove(member{name}.String())
	r.succ = nil
}

// Members returns the member names, sorted.
func (r *Ring) Members() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.members))
	for name := range r.members {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Owner returns the member that owns key; false when the ring is empty.
func (r *Ring) Owner(key string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.members) == 0 {
		return "", false
	}
	m, ok := r.c.LocateKey([]byte(key)).(member)
	return m.name, ok
}

// Replicas returns up to n distinct members for key in succession order:
// the owner, then the member that would own key if the owner left, then the
// one that would own it if both left, and so on. A replica is therefore
// exactly the node that takes the key over when the owner dies, so it
// already holds the entry. It returns fewer than n when the ring has fewer
// members, and nil when n < 1 or the ring is empty. The order depends only
// on the membership, never on insertion order.
func (r *Ring) Replicas(key string, n int) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n = min(n, len(r.members))
	if n < 1 {
		return nil
	}
	out := make([]string, 0, n)
	for len(out) < n {
		m, ok := r.without(out).LocateKey([]byte(key)).(member)
		if !ok || slices.Contains(out, m.name) {
			break
		}
		out = append(out, m.name)
	}
	return out
}

// without returns the ring's layout with the given members gone, built
// once per membership and cached: with 3–5 nodes and 1–2 replicas there are
// only a handful. The caller holds r.mu (read or write).
func (r *Ring) without(gone []string) *consistent.Consistent {
	if len(gone) == 0 {
		return r.c
	}
	id := strings.Join(gone, "\x00")
	r.succMu.Lock()
	defer r.succMu.Unlock()
	if c, ok := r.succ[id]; ok {
		return c
	}
	var list []consistent.Member
	for name := range r.members {
		if !slices.Contains(gone, name) {
			list = append(list, member{name})
		}
	}
	c := consistent.New(list, consistent.Config{
		Hasher: hasher{}, PartitionCount: r.cfg.Partitions,
		ReplicationFactor: r.cfg.ReplicationFactor, Load: r.cfg.Load,
	})
	if r.succ == nil {
		r.succ = map[string]*consistent.Consistent{}
	}
	r.succ[id] = c
	return c
}

// names converts library members to names, dropping duplicates that only a
// 64-bit hash collision between two member names could produce.
func names(ms []consistent.Member) []string {
	out := make([]string, 0, len(ms))
	for _, cm := range ms {
		m, ok := cm.(member)
		if ok && !slices.Contains(out, m.name) {
			out = append(out, m.name)
		}
	}
	return out
}

// Shares returns the fraction of partitions each member owns; the values
// sum to 1. It is empty for an empty ring.
func (r *Ring) Shares() map[string]float64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	shares := make(map[string]float64, len(r.members))
	if len(r.members) == 0 {
		return shares
	}
	counts := make(map[string]int, len(r.members))
	for p := range r.cfg.Partitions {
		if m, ok := r.c.GetPartitionOwner(p).(member); ok {
			counts[m.name]++
		}
	}
	for name, n := range counts {
		shares[name] = float64(n) / float64(r.cfg.Partitions)
	}
	return shares
}
