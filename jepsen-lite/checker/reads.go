package checker

import (
	"sort"
	"strings"
	"time"

	"github.com/levee/levee/jepsen-lite/history"
)

// Staleness checks that no ok body is older than fresh + stale +
// stale_if_error (+ ClockSlack) when its read was invoked. Age is measured
// from the invoke, the earliest instant the body can have been served, so
// a slow response is never blamed on the cache; and to the body's last
// confirmation: its fetched_at, or a later 304 the upstream sent for the
// same (tenant, key) before the invoke (a 304 says the body is still
// current, and renews the entry without a new body).
func Staleness(h *History, cfg Config) Result {
	b := newResult("staleness", cfg)
	rt := h.Meta.Routes
	bound := (rt.Fresh + rt.Stale + rt.StaleIfError + cfg.ClockSlack).Nanoseconds()
	swr := (rt.Fresh + rt.Stale + cfg.ClockSlack).Nanoseconds()
	var ages []int64
	var maxHealthy int64
	overSWR := 0
	confirmations := newConfirmations(h.Upstream)
	for _, r := range reads(h.Ops) {
		if r.Type != history.OK || r.FetchedAt.IsZero() {
			continue
		}
		age := r.Invoke - confirmations.last(r, h.runTime(r.FetchedAt))
		ages = append(ages, age)
		if age > bound {
			b.violate(r.Invoke, "process %d %s %s via %s: body fetched at %s is %s old, bound %s",
				r.Process, r.Tenant, r.Key, r.Node, secs(h.runTime(r.FetchedAt)), ms(age), ms(bound))
		}
		if h.phaseAt(r.Invoke, cfg.Settle) == PhaseHealthy {
			maxHealthy = max(maxHealthy, age)
			if age > swr {
				overSWR++
			}
		}
	}
	b.fig("ok bodies", "%d", len(ages))
	b.fig("bound", "%s", time.Duration(bound))
	b.fig("age p50/p99/max", "%s/%s/%s", ms(quantile(ages, 0.5)), ms(quantile(ages, 0.99)), ms(quantile(ages, 1)))
	b.fig("max age healthy", "%s (%d older than fresh+stale, informational)", ms(maxHealthy), overSWR)
	return b.done()
}

// NoTimeTravel checks that, per (process, tenant, key), the versions of ok
// bodies never decrease in completion order. Not judged, and counted:
// regressions around split faults (splitAround), regressions after a
// restarting node answered as a key's owner before it rejoined
// (ownedWhileRejoining), and regressions to a copy saved before a
// kill-all when the newer copy was fetched too soon before it to be saved
// (unsavedNewer).
func NoTimeTravel(h *History, cfg Config) Result {
	b := newResult("no-time-travel", cfg)
	type pk struct {
		p           int
		tenant, key string
	}
	last := map[pk]read{}
	checked, split, rejoining, unsaved := 0, 0, 0, 0
	horizon := cfg.Settle + h.Meta.Routes.Fresh + h.Meta.Routes.Stale
	for _, r := range reads(h.Ops) {
		if r.Type != history.OK || r.Version == 0 {
			continue
		}
		checked++
		k := pk{r.Process, r.Tenant, r.Key}
		prev, ok := last[k]
		if ok && r.Version < prev.Version {
			// While the cluster is split, each side's owner serves its own
			// copy (availability first): a client reading through both
			// sides can see a version go back. Counted, not judged, until
			// the copies from before the heal have left their fresh and
			// stale windows and the hand-off has delivered the newer one.
			if h.splitAround(prev.Time, r.Time, horizon) {
				split++
				last[k] = r
				continue
			}
			// A node that has just restarted and not yet rejoined sees
			// only itself on its ring, so it answers as the owner of keys
			// it does not own: while the cluster re-forms, one key has two
			// owners, as in a split. Counted, not judged, on the same
			// horizon.
			if h.ownedWhileRejoining(prev.Op, r.Op, horizon) {
				rejoining++
				last[k] = r
				continue
			}
			// A kill-all loses what was cached since the last periodic
			// save: the node may come back with the older copy its file
			// held.
			if h.unsavedNewer(prev, r, cfg) {
				unsaved++
				last[k] = r
				continue
			}
			b.violate(r.Time, "process %d %s %s: version %d via %s (%s) after version %d via %s at %s",
				r.Process, r.Tenant, r.Key, r.Version, r.Node, r.XCache, prev.Version, prev.Node, secs(prev.Time))
			continue
		}
		last[k] = r
	}
	b.fig("versioned reads", "%d", checked)
	b.fig("process/key histories", "%d", len(last))
	b.fig("regressions while split (counted, not judged)", "%d", split)
	b.fig("regressions across a restarted node answering as owner before rejoining (counted, not judged)", "%d", rejoining)
	b.fig("regressions to a saved copy after kill-all (newer one unsaved; counted, not judged)", "%d", unsaved)
	return b.done()
}

// ownedWhileRejoining reports whether one of the two reads of a
// regression, newer (the read whose version r went back from) or r, was
// answered by a node acting as the key's owner while it was restarting
// (from going down until it was ready again: its ring may hold only the
// members it has seen so far), the key's owner for the other read being
// another node, and r came within horizon of that node being ready. The
// node may have fetched the newer copy (and the real owner served its
// older one), or served the older copy it saved (and the real owner held
// the newer one): either way, two owners at once.
func (h *History) ownedWhileRejoining(newer, r history.Op, horizon time.Duration) bool {
	return h.actedAsOwner(newer, r, r.Time, horizon) || h.actedAsOwner(r, newer, r.Time, horizon)
}

// actedAsOwner reports whether x was answered by its node acting as the
// key's owner while that node was restarting, other's owner being
// another node, and at came within horizon of the node being ready.
func (h *History) actedAsOwner(x, other history.Op, at int64, horizon time.Duration) bool {
	if x.Owner == "" || x.Owner != x.Node || other.Owner == x.Owner {
		return false
	}
	for _, rs := range restarts(h) {
		ready := h.rejoined(rs)
		if rs.node == x.Node && x.Time >= rs.down && x.Time <= ready && at <= ready+horizon.Nanoseconds() {
			return true
		}
	}
	return false
}

// joinGrace is Levee's mesh.JoinGrace: how long a restarted node with
// gossip seeds stays unready while its ring holds only itself.
const joinGrace = 10 * time.Second

// rejoined is when the restarted node was back with the cluster. A
// rolling restart's step records when it answered /-/readyz, which waits
// for a peer on its ring; a kill window records only when the nemesis
// restarted its targets, so there it is the node's first membership
// sample from then on whose ring holds another member, or that end plus
// joinGrace when no sample shows one sooner.
func (h *History) rejoined(rs restart) int64 {
	if !isKill(rs.kind) {
		return rs.ready
	}
	limit := rs.ready + joinGrace.Nanoseconds()
	for _, m := range h.Members {
		if m.Node == rs.node && m.Reached && m.Time >= rs.ready && m.Time < limit && len(m.Ring) > 1 {
			return m.Time
		}
	}
	return limit
}

// unsavedNewer reports whether the regression from prev to r is a node
// serving, after a whole-cluster restart w that did not keep prev's copy
// (see cacheLoss), an older copy its cache file held: both bodies were
// fetched before w began and r was invoked after. Only with cache
// persistence: without it no copy from before w survives to be served.
func (h *History) unsavedNewer(prev, r read, cfg Config) bool {
	if !h.Meta.Routes.CachePersist || prev.FetchedAt.IsZero() || r.FetchedAt.IsZero() {
		return false
	}
	pf, rf := h.runTime(prev.FetchedAt), h.runTime(r.FetchedAt)
	for _, w := range h.active() {
		if (w.Kind != kindRestartAll && w.Kind != kindKillAll) || w.Start <= max(pf, rf) || w.Start >= r.Invoke {
			continue
		}
		if !h.keeps(w, pf, cfg) {
			return true
		}
	}
	return false
}

// splitKinds are the faults that can give one key two owners at once: the
// cluster is cut (or a node is frozen or loses packets) while both sides
// keep serving.
var splitKinds = map[string]bool{
	"isolate-node": true, "isolate-leader": true, "isolate-owner": true, "halves": true,
	"majorities-ring": true, "bridge": true, "pause": true, "loss": true,
}

// splitAround reports whether a split fault window was open at any time
// between from and to, or ended less than horizon before to.
func (h *History) splitAround(from, to int64, horizon time.Duration) bool {
	for _, f := range h.active() {
		if !splitKinds[f.Kind] {
			continue
		}
		end := h.faultEnd(f)
		if f.Start <= to && end+horizon.Nanoseconds() >= from {
			return true
		}
	}
	return false
}

// TenantIsolation checks that every ok body is tagged with the tenant that
// asked for it and with the key it asked for.
func TenantIsolation(h *History, cfg Config) Result {
	b := newResult("tenant-isolation", cfg)
	checked, unverifiable := 0, 0
	for _, r := range reads(h.Ops) {
		if r.Type != history.OK {
			continue
		}
		if r.Error != "" {
			unverifiable++
			continue
		}
		checked++
		if r.BodyTenant != r.Tenant {
			b.violate(r.Time, "process %d asked as %q for %s via %s, got a body of tenant %q (%s)",
				r.Process, r.Tenant, r.Key, r.Node, r.BodyTenant, r.XCache)
		} else if !strings.HasSuffix(r.BodyKey, "/"+strings.TrimPrefix(r.Key, "/")) {
			b.violate(r.Time, "process %d asked for %s via %s, got the body of %s", r.Process, r.Key, r.Node, r.BodyKey)
		}
	}
	b.fig("ok bodies checked", "%d", checked)
	b.fig("ok bodies not decodable", "%d", unverifiable)
	return b.done()
}

// quantile returns the q-quantile (nearest rank) of vs; 0 when empty.
func quantile(vs []int64, q float64) int64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]int64(nil), vs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// confirmations holds, per (tenant, upstream key), the times of 304s.
type confirmations map[tenantKey][]int64

func newConfirmations(calls []history.UpstreamCall) confirmations {
	c := confirmations{}
	for _, u := range calls {
		if u.Status == 304 {
			k := tenantKey{u.Tenant, u.Key}
			c[k] = append(c[k], u.Time)
		}
	}
	for _, ts := range c {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	}
	return c
}

// last is the latest confirmation of r's body at or before its invoke:
// fetched, or the last 304 for its (tenant, body key) after fetched.
func (c confirmations) last(r read, fetched int64) int64 {
	ts := c[tenantKey{r.BodyTenant, r.BodyKey}]
	i := sort.Search(len(ts), func(i int) bool { return ts[i] > r.Invoke })
	if i > 0 && ts[i-1] > fetched {
		return ts[i-1]
	}
	return fetched
}
