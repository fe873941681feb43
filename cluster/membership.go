package cluster

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Lifecycle errors of Membership.
var (
	// ErrMembershipNotStarted reports a call that needs Start first.
	ErrMembershipNotStarted = errors.New("cluster: membership not started")
	// ErrMembershipStarted reports a second Start.
	ErrMembershipStarted = errors.New("cluster: membership already started")
	// ErrMembershipClosed reports a call after Close.
	ErrMembershipClosed = errors.New("cluster: membership closed")
	// ErrLeaveTimeout reports a Leave whose broadcast was not confirmed
	// in time; the node has still left and keeps gossiping it until Close.
	ErrLeaveTimeout = errors.New("cluster: leave broadcast not confirmed in time")
	// ErrUpdateTimeout reports a metadata change whose broadcast was not
	// confirmed in time; it is still in effect and spreads by gossip.
	ErrUpdateTimeout = errors.New("cluster: metadata update not confirmed in time")
)

// MemberState is a member's liveness as this node sees it.
type MemberState int

const (
	// Alive members answer probes.
	Alive MemberState = iota
	// Suspect members missed probes but are not declared dead yet.
	// Memberlist v0.7.0 exposes suspicion neither as an event nor as
	// race-free state, so this package never reports it today.
	Suspect
	// Dead members were declared failed by the cluster.
	Dead
	// Left members announced a graceful leave.
	Left
)

func (s MemberState) String() string {
	switch s {
	case Alive:
		return "alive"
	case Suspect:
		return "suspect"
	case Dead:
		return "dead"
	case Left:
		return "left"
	}
	return fmt.Sprintf("MemberState(%d)", int(s))
}

// Member is one node of the cluster.
type Member struct {
	Name       string
	GossipAddr string // host:port of memberlist
	HTTPAddr   string // from node metadata; "" if the peer sent none or it was undecodable
	RaftAddr   string // from node metadata; "" if none
	PeerAddr   string // from node metadata; "" if none (a node that predates it)
	State      MemberState
	// Bootstrapped is the member's gossiped "I hold Raft state" flag (see
	// Membership.SetBootstrapped); false if it never set it or predates it.
	Bootstrapped bool
}

// EventType says what happened to a member.
type EventType int

const (
	// EventJoin: a member became alive (first seen, or back after
	// dead/left). The first event of every Membership is its own join.
	EventJoin EventType = iota
	// EventUpdate: an alive member changed its metadata.
	EventUpdate
	// EventLeave: a member left gracefully (it called Leave).
	EventLeave
	// EventFail: a member was declared dead without announcing a leave.
	EventFail
)

func (t EventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one membership change.
type Event struct {
	Type   EventType
	Member Member
}

// memberRecord is the member table entry: the Member plus what the table
// needs to classify a leave and reap the dead.
type memberRecord struct {
	member  Member
	leaving bool      // gossiped the Leaving flag before going away
	since   time.Time // when it became Dead or Left
}

// Membership tracks cluster members with hashicorp/memberlist and reports
// changes on Events. New does no I/O; Start binds and joins; Close stops
// everything and is safe to call twice or before Start.
type Membership struct {
	cfg    MembershipConfig
	log    *slog.Logger
	queue  *memberEventQueue
	events chan Event
	subs   []func(Event) // see Subscribe

	leaving        atomic.Bool  // advertise Leaving in metadata
	bootstrapped   atomic.Bool  // advertise Bootstrapped in metadata
	rejoinAttempts atomic.Int64 // rejoin loop iterations, for tests and debugging

	lifeMu  sync.Mutex // serialises Start, Leave and Close
	ml      *memberlist.Memberlist
	started bool
	left    atomic.Bool
	closed  bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex // guards members and gossipAddr
	members map[string]*memberRecord
	gossip  string
}

// eventBuffer is the Events channel capacity; the queue behind it is
// unbounded.
const eventBuffer = 64

// NewMembership validates cfg and returns an unstarted Membership.
func NewMembership(cfg MembershipConfig) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Join = slices.Clone(cfg.Join)
	cfg.TrustedSecrets = slices.Clone(cfg.TrustedSecrets)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Membership{
		cfg:     cfg,
		log:     logger,
		queue:   newMemberEventQueue(),
		events:  make(chan Event, eventBuffer),
		members: make(map[string]*memberRecord),
	}, nil
}

// Events delivers membership changes in the order memberlist reported them,
// starting with this node's own EventJoin. Delivery never blocks memberlist:
// events wait in an unbounded queue in front of a buffered channel. The
// channel is closed by Close; events not yet delivered then are dropped.
func (m *Membership) Events() <-chan Event { return m.events }

// Subscribe has fn called with every event, in order, from one goroutine
// the Membership owns; subscribers are called in the order they
// subscribed, so one can rely on an earlier one having seen the event
// (the ring before replication, say). fn must not block for long: it
// holds up the events behind it. Subscribe before Start; a Membership
// with subscribers delivers to them instead of on Events.
func (m *Membership) Subscribe(fn func(Event)) {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	m.subs = append(m.subs, fn)
}

// dispatch delivers events to the subscribers until ctx ends (Close).
func (m *Membership) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-m.events:
			for _, fn := range m.subs {
				fn(ev)
			}
		}
	}
}

// Start binds the gossip listener, joins the seeds and starts the rejoin
// loop. A failed initial join is logged, not returned: the rejoin loop keeps
// trying. The initial join blocks up to Timings.TCPTimeout per unreachable
// seed. ctx bounds Start only; background work runs until Close.
func (m *Membership) Start(ctx context.Context) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	switch {
	case m.closed:
		return ErrMembershipClosed
	case m.started:
		return ErrMembershipStarted
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	conf, err := m.memberlistConfig()
	if err != nil {
		return fmt.Errorf("cluster: start memberlist: %w", err)
	}
	bg, cancel := context.WithCancel(context.Background())
	m.wg.Go(func() { m.queue.pump(bg, m.events) })
	if len(m.subs) > 0 {
		m.wg.Go(func() { m.dispatch(bg) })
	}
	ml, err := memberlist.Create(conf)
	if err != nil {
		cancel()
		m.wg.Wait()
		return fmt.Errorf("cluster: start memberlist: %w", err)
	}
	m.ml, m.cancel, m.started = ml, cancel, true
	m.setGossipAddr(ml)
	if m.cfg.LegacyGossipKey {
		m.log.Warn("sending gossip under the legacy sha256 key; turn cluster.legacy_gossip_key off once every node runs this release")
	}
	if len(m.cfg.Join) > 0 && ctx.Err() == nil {
		m.join(m.cfg.Join)
	}
	m.wg.Go(func() { m.rejoinLoop(bg) })
	return nil
}

// setGossipAddr records the advertised address. Right after Create nothing
// else can be updating the local node, so reading it does not race.
func (m *Membership) setGossipAddr(ml *memberlist.Memberlist) {
	addr := ml.LocalNode().Address()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gossip = addr
}

// memberlistConfig translates the validated config.
func (m *Membership) memberlistConfig() (*memberlist.Config, error) {
	c := memberlist.DefaultLANConfig()
	c.Name = m.cfg.Name
	host, port, _ := splitIPPort(m.cfg.BindAddr, false) // validated
	if host == "" {
		host = "0.0.0.0"
	}
	c.BindAddr, c.BindPort, c.AdvertisePort = host, port, port
	if m.cfg.AdvertiseAddr != "" {
		ahost, aport, _ := splitIPPort(m.cfg.AdvertiseAddr, true) // validated
		c.AdvertiseAddr = ahost
		if aport != 0 {
			c.AdvertisePort = aport
		}
	}
	m.cfg.Timings.apply(c)
	if m.cfg.Secret != "" {
		keyring, err := m.cfg.gossipKeyring()
		if err != nil {
			return nil, err
		}
		c.Keyring = keyring
	}
	c.Delegate = memberMeta{m}
	c.Events = memberEvents{m}
	c.Logger = log.New(memberlistLogWriter{m.log.With("src", "memberlist")}, "", 0)
	return c, nil
}

// localMeta is the metadata this node advertises right now.
func (m *Membership) localMeta() nodeMeta {
	return nodeMeta{HTTPAddr: m.cfg.HTTPAddr, RaftAddr: m.cfg.RaftAddr, PeerAddr: m.cfg.PeerAddr, Leaving: m.leaving.Load(), Bootstrapped: m.bootstrapped.Load()}
}

// join contacts addrs; failure is logged because the rejoin loop retries.
func (m *Membership) join(addrs []string) {
	n, err := m.ml.Join(addrs)
	if err != nil {
		m.log.Warn("join failed; will retry", "targets", addrs, "err", err)
		return
	}
	m.log.Debug("joined", "contacted", n, "targets", addrs)
}

// rejoinLoop periodically re-joins the seeds and recently failed members:
// memberlist stops probing a dead peer, so without this two halves of a
// healed partition would stay apart forever (hashicorp/memberlist#222).
func (m *Membership) rejoinLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.RejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m.left.Load() {
			return
		}
		m.rejoinAttempts.Add(1)
		if targets := m.rejoinTargets(time.Now()); len(targets) > 0 {
			m.join(targets)
		}
	}
}

// rejoinTargets returns the seeds plus failed members' addresses, minus
// this node's own address, and reaps members departed for longer than
// DeadRetention. Re-joining a seed that is already a member is a cheap
// state sync.
func (m *Membership) rejoinTargets(now time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	targets := slices.Clone(m.cfg.Join)
	for name, rec := range m.members {
		switch {
		case rec.member.State == Alive:
		case now.Sub(rec.since) > m.cfg.DeadRetention:
			delete(m.members, name)
		case rec.member.State == Dead:
			targets = append(targets, rec.member.GossipAddr)
		}
	}
	slices.Sort(targets)
	targets = slices.Compact(targets)
	return slices.DeleteFunc(targets, func(a string) bool { return a == m.gossip || a == "" })
}

// Leave announces a graceful leave and waits up to timeout for the
// announcement to go out. Peers then report EventLeave rather than
// EventFail. The node keeps gossiping until Close, which should follow.
// Calling it twice is harmless.
func (m *Membership) Leave(timeout time.Duration) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	switch {
	case m.closed:
		return ErrMembershipClosed
	case !m.started:
		return ErrMembershipNotStarted
	case m.left.Swap(true):
		return nil
	}
	deadline := time.Now().Add(timeout)
	// Gossip the Leaving flag first so peers can classify the leave that
	// follows. A non-positive wait would make memberlist wait forever.
	m.leaving.Store(true)
	if err := m.ml.UpdateNode(max(timeout/2, time.Millisecond)); err != nil {
		m.log.Debug("leaving flag not confirmed", "err", err)
	}
	if err := m.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
		return fmt.Errorf("%w: %w", ErrLeaveTimeout, err)
	}
	return nil
}

// SetBootstrapped sets the Bootstrapped flag this node gossips (Raft glue
// publishes "this node holds Raft state" with it) and, once started, waits
// up to timeout for the update to be broadcast; ErrUpdateTimeout then means
// the flag is set and still spreading. Peers see it as an EventUpdate.
// Before Start it only sets what Start will advertise. Setting the current
// value again sends nothing.
func (m *Membership) SetBootstrapped(v bool, timeout time.Duration) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	switch {
	case m.closed:
		return ErrMembershipClosed
	case m.bootstrapped.Swap(v) == v, !m.started:
		return nil
	}
	// A non-positive wait would make memberlist wait forever.
	if err := m.ml.UpdateNode(max(timeout, time.Millisecond)); err != nil {
		return fmt.Errorf("%w: %w", ErrUpdateTimeout, err)
	}
	return nil
}

// Close stops the rejoin loop and event delivery, shuts memberlist down
// without a leave broadcast (peers will see a failure unless Leave ran
// first) and closes the Events channel. It is idempotent and safe before
// Start. It can wait up to Timings.TCPTimeout for a join in flight.
func (m *Membership) Close() error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.cancel != nil {
		m.cancel()
	}
	// The loops stop before memberlist so no join runs on a shut-down
	// memberlist, and the pump is the only sender on events, so closing
	// the channel after it returns is safe.
	m.wg.Wait()
	var err error
	if m.ml != nil {
		err = m.ml.Shutdown()
	}
	close(m.events)
	return err
}
