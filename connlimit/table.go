package connlimit

import (
	"container/heap"
	"net/netip"
	"time"
)

// state is where a connection is in its life (see doc.go).
type state uint32

const (
	stateGone state = iota // not in the table: closed, or never admitted
	statePending
	stateActive
	stateIdle
)

// entry is one connection in the table. Every field is the table's (the
// Listener's mutex).
type entry struct {
	key   netip.Addr // its client address (addrKey)
	state state      //
	since time.Time  // when it entered its state
	// byState links it into the list its state keeps (pending or idle),
	// byAddr into its address's pending list. The lists are intrusive, so
	// a keep-alive request, which moves its connection from idle to
	// pending to active and back, allocates nothing.
	byState, byAddr links
	// waiting: pending, and its server goroutine is blocked reading it,
	// waiting on its client. Only waiting connections count against the
	// pending bounds: a burst of honest connections whose requests sit
	// unread in the kernel while the server catches up is the server's
	// delay, not its clients' (2,000 opened at once from one address had
	// up to 932 pending at once under the race detector, few waiting).
	waiting bool
	// onState is told every state change, under the table's lock (the
	// conn mirrors it in an atomic for its hot path). Optional.
	onState func(state)
	// c is the connection, which a victim's closer resets; nil in the
	// table's own tests.
	c *conn
}

func (e *entry) set(s state, now time.Time) {
	e.state, e.since = s, now
	if e.onState != nil {
		e.onState(s)
	}
}

// victim is a connection the table removed that must be closed.
type victim struct {
	e      *entry
	reason Reason
}

// address holds one client address's pending connections, oldest first.
// It lives while the address has a connection open (conns), so a client's
// keep-alive requests do not make and drop it each time; the table's
// memory follows its connections, not the addresses ever seen.
type address struct {
	key     netip.Addr
	pending entryList // by entry.byAddr
	conns   int       // open connections, in any state
	waiting int       // of pending
	index   int       // in table.heavy
}

// table is the bookkeeping behind a Listener: connections by state, in
// the order they entered it, and pending ones by address. It does no I/O
// and reads no clock: every call takes now, and returns the connections
// it removed for the caller to close.
type table struct {
	cfg     Config
	pending entryList // by entry.byState, oldest first
	idle    entryList // by entry.byState, oldest first
	active  int
	waiting int // of pending
	addrs   map[netip.Addr]*address
	heavy   heaviest
}

func newTable(cfg Config) *table {
	return &table{cfg: cfg, addrs: make(map[netip.Addr]*address),
		pending: entryList{at: byState}, idle: entryList{at: byState}}
}

func (t *table) open() int { return t.pending.len + t.idle.len + t.active }

// add admits a new connection from key as pending, or refuses it for
// why: MaxPending are waiting, most of them key's and young
// (ReasonPendingCap), or MaxConns are open and every one of them is
// active (ReasonRefused).
func (t *table) add(e *entry, key netip.Addr, now time.Time) (vs []victim, admitted bool, why Reason) {
	e.key = key
	vs = t.sweep(nil, now)
	if vs, admitted = t.makeRoomFor(vs, key, now); !admitted {
		return vs, false, ReasonPendingCap
	}
	if t.open() >= t.cfg.MaxConns {
		switch {
		case t.idle.len > 0:
			vs = t.evict(vs, t.idle.front, ReasonIdleEvicted)
		case t.waiting > 0: // MaxPending near MaxConns: waiting ones filled it
			vs = t.evict(vs, t.heaviestOldest(), ReasonPendingCap)
		default:
			return vs, false, ReasonRefused
		}
	}
	t.join(e)
	return t.makePending(vs, e, now), true, 0
}

// arrived moves an idle connection on which a next request began to
// pending; other states stay as they are. When its address has no room,
// it is the victim.
func (t *table) arrived(e *entry, now time.Time) []victim {
	if e.state != stateIdle {
		return nil
	}
	t.unlink(e)
	vs, ok := t.makeRoomFor(t.sweep(nil, now), e.key, now)
	if !ok {
		t.leave(e)
		e.set(stateGone, now)
		return append(vs, victim{e, ReasonPendingCap})
	}
	return t.makePending(vs, e, now)
}

// makeRoomFor makes room for one more pending connection from key. An
// address at MaxPendingPerIP gives way its oldest if that has been pending
// longer than PressureTimeout (no honest client takes that long to send
// its headers). Over MaxPending, the address holding the most gives way
// its oldest; when that is key's own and young, the new connection is
// refused instead: a young connection cannot be told from an honest one
// (2,000 app servers behind one NAT address, opened at once by a loaded
// client, had over 1,024 waiting young), and refusing costs the node an
// accept and a reset where an exchange would cost a served connection's
// setup each time the same client dialled again.
func (t *table) makeRoomFor(vs []victim, key netip.Addr, now time.Time) ([]victim, bool) {
	if a := t.addrs[key]; a != nil && a.waiting >= t.cfg.MaxPendingPerIP {
		if old := oldestWaiting(&a.pending); old != nil && now.Sub(old.since) > t.cfg.PressureTimeout {
			vs = t.evict(vs, old, ReasonPendingPerIP)
		}
	}
	if t.waiting < t.cfg.MaxPending {
		return vs, true
	}
	v := t.heaviestOldest()
	if v.key == key && now.Sub(v.since) <= t.cfg.PressureTimeout {
		return vs, false
	}
	return t.evict(vs, v, ReasonPendingCap), true
}

// oldestWaiting is the first waiting entry of l (a list of entries,
// oldest first), nil if none is.
func oldestWaiting(l *entryList) *entry {
	for e := l.front; e != nil; e = l.at(e).next {
		if e.waiting {
			return e
		}
	}
	return nil
}

// wait records whether a pending connection's server goroutine is blocked
// reading it; other states ignore it.
func (t *table) wait(e *entry, waiting bool) {
	if e.state != statePending || e.waiting == waiting {
		return
	}
	d := 1
	if !waiting {
		d = -1
	}
	e.waiting = waiting
	t.waiting += d
	a := t.addrs[e.key]
	a.waiting += d
	heap.Fix(&t.heavy, a.index)
}

// received marks a pending connection's request as arrived whole.
// Only a pending connection's time is ever read (sweep, makeRoomFor), so
// an active or idle one is not given one: a keep-alive request reads the
// clock once, when it begins (arrived), not at each change.
func (t *table) received(e *entry) {
	if e.state != statePending {
		return
	}
	t.unlink(e)
	t.active++
	e.set(stateActive, time.Time{})
}

// idled marks a connection as between requests (no time: see received).
func (t *table) idled(e *entry) {
	if e.state == stateGone || e.state == stateIdle {
		return
	}
	t.unlink(e)
	t.idle.pushBack(e)
	e.set(stateIdle, time.Time{})
}

// remove forgets a closed connection.
func (t *table) remove(e *entry) {
	if e.state == stateGone {
		return
	}
	t.unlink(e)
	t.leave(e)
	e.set(stateGone, e.since)
}

// join counts a new connection of e's address, making the address's
// record when it is the first.
func (t *table) join(e *entry) {
	a := t.addrs[e.key]
	if a == nil {
		a = &address{key: e.key, pending: entryList{at: byAddr}}
		t.addrs[e.key] = a
		heap.Push(&t.heavy, a)
	}
	a.conns++
}

// leave uncounts a connection of e's address (out of every list already),
// dropping the address's record with its last connection.
func (t *table) leave(e *entry) {
	a := t.addrs[e.key]
	if a.conns--; a.conns == 0 {
		heap.Remove(&t.heavy, a.index)
		delete(t.addrs, e.key)
	}
}

// makePending links e as pending, once makeRoomFor has made room: e is
// not waiting yet, but will be once read.
func (t *table) makePending(vs []victim, e *entry, now time.Time) []victim {
	e.set(statePending, now)
	t.pending.pushBack(e)
	t.addrs[e.key].pending.pushBack(e)
	return vs
}

// heaviestOldest is the oldest waiting connection of the address with
// the most waiting; when none has more than one, the oldest waiting of
// all; nil when none waits.
func (t *table) heaviestOldest() *entry {
	if len(t.heavy) > 0 && t.heavy[0].waiting > 1 {
		return oldestWaiting(&t.heavy[0].pending)
	}
	return oldestWaiting(&t.pending)
}

// sweep closes, oldest first, the waiting connections pending longer
// than PressureTimeout while more than MaxPending/2 are waiting.
func (t *table) sweep(vs []victim, now time.Time) []victim {
	for e := t.pending.front; e != nil && t.waiting > t.cfg.MaxPending/2; {
		if now.Sub(e.since) <= t.cfg.PressureTimeout {
			break
		}
		next := e.byState.next
		if e.waiting {
			vs = t.evict(vs, e, ReasonPressureTimeout)
		}
		e = next
	}
	return vs
}

func (t *table) evict(vs []victim, e *entry, r Reason) []victim {
	t.remove(e)
	return append(vs, victim{e, r})
}

// unlink takes e out of whichever list its state keeps it in.
func (t *table) unlink(e *entry) {
	switch e.state {
	case statePending:
		t.wait(e, false) // the heap orders by waiting alone
		t.pending.remove(e)
		t.addrs[e.key].pending.remove(e)
	case stateIdle:
		t.idle.remove(e)
	case stateActive:
		t.active--
	}
}

// heaviest is a max-heap of addresses by waiting connections held.
type heaviest []*address

func (h heaviest) Len() int           { return len(h) }
func (h heaviest) Less(i, j int) bool { return h[i].waiting > h[j].waiting }
func (h heaviest) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *heaviest) Push(x any) {
	a := x.(*address)
	a.index = len(*h)
	*h = append(*h, a)
}
func (h *heaviest) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return a
}

// links are an entry's place in one entryList.
type links struct{ prev, next *entry }

func byState(e *entry) *links { return &e.byState }
func byAddr(e *entry) *links  { return &e.byAddr }

// entryList is a doubly linked list of entries threaded through the
// links at picks (an entry is in at most one list of each kind), oldest
// first: container/list without an element to allocate per insert.
type entryList struct {
	front, back *entry
	len         int
	at          func(*entry) *links
}

func (l *entryList) pushBack(e *entry) {
	ln := l.at(e)
	ln.prev, ln.next = l.back, nil
	if l.back != nil {
		l.at(l.back).next = e
	} else {
		l.front = e
	}
	l.back = e
	l.len++
}

func (l *entryList) remove(e *entry) {
	ln := l.at(e)
	if ln.prev != nil {
		l.at(ln.prev).next = ln.next
	} else {
		l.front = ln.next
	}
	if ln.next != nil {
		l.at(ln.next).prev = ln.prev
	} else {
		l.back = ln.prev
	}
	ln.prev, ln.next = nil, nil
	l.len--
}
