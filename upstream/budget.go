package upstream

// Budget is the cluster's provider budget for the hosts whose
// Limits.Shared is set (control.Budgets implements it over the Raft
// log, package budget): it hears every attempt to such a host and gives
// this node its lease of the host's learned cluster-wide rate. The lease
// is the ceiling of the node's own learned limits (adaptive.go), which
// still react to each 429 at once, between two leases. Hosts are keyed as
// hostkey.Of. Implementations must be safe for concurrent use and must
// not block.
type Budget interface {
	// Lease is the rate, in attempts a second, this node may send to host
	// now; ok is false while the cluster has no budget for the host yet,
	// and the node's share of the host's caps applies.
	Lease(host string) (rate float64, ok bool)
	// Count hears one attempt's part: wanted (it asked to be let through:
	// the node's demand, whether the lease then carried it or not), sent
	// (it left) or lost (answered 429 or 503). ceiling and floor are the
	// host's cluster-wide rate cap and adaptive floor, which the budget
	// stays between.
	Count(host string, wanted, sent, lost int, ceiling, floor float64)
}

// budgetOf returns the budget a host's calls count against: nil unless
// the host is adaptive and shared and the Client has a Budget.
func (k *call) budgetOf() (Budget, *learner, Limits) {
	a := k.hl.learn.Load()
	if k.c.budget == nil || a == nil {
		return nil, nil, Limits{}
	}
	if t := a.caps(); t.Shared {
		return k.c.budget, a, t
	}
	return nil, nil, Limits{}
}

// count hands one attempt's part to the host's budget, if it has one.
func (k *call) count(wanted, sent, lost int) {
	if b, _, t := k.budgetOf(); b != nil {
		t = t.withDefaults()
		b.Count(k.hostKey, wanted, sent, lost, t.Rate, totalFloor(t))
	}
}

// askLease counts an attempt asking for admission as demand, and applies
// the node's lease before the attempt waits under it: a lease that grew
// since the last attempt must not wait for that attempt's token.
func (k *call) askLease() {
	b, a, t := k.budgetOf()
	if b == nil {
		return
	}
	k.count(1, 0, 0)
	a.lease(b, k.hostKey, t)
	a.apply(k.hl, k.hostKey, k.c.log, false)
}

// lease rebounds the host's learned limits to this node's lease of the
// cluster's budget when it moved: the rate is the lease, floor and
// ceiling both (the cluster learns the rate: a node cutting it again on
// its own 429s would stack two cuts on one loss), and the in-flight
// ceiling the host's in-flight cap in the same proportion, under which
// the node still learns its in-flight limit.
func (a *learner) lease(b Budget, host string, total Limits) {
	rate, ok := b.Lease(host)
	if !ok || rate <= 0 {
		return
	}
	a.mu.Lock()
	if rate == a.leased {
		a.mu.Unlock()
		return
	}
	a.leased = rate
	a.mu.Unlock()
	total = total.withDefaults()
	inflight := max(1, float64(total.Inflight)*min(rate/total.Rate, 1))
	a.host.Rebound(rate, rate, inflight)
}

// totalFloor is a host's cluster-wide adaptive floor, defaults filled.
func totalFloor(t Limits) float64 {
	return nodeFloor(t, t.withDefaults(), 1)
}
