package upstream

import (
	"fmt"
	"log/slog"

	"golang.org/x/time/rate"

	"github.com/levee/levee/upstream/hostkey"
)

// Cluster-wide caps, node by node. Every cap this package applies (a
// host's in-flight slots, its token bucket, the global in-flight slots)
// is configured as a total for the whole cluster, and each node applies
// its share of it: the total divided by the live members, so the host
// sees at most the configured rate from the cluster however many nodes
// run. The node tells its Client how many members are live (SetShare)
// each time membership changes; a single node keeps the whole, and so
// does a node until it hears of its first membership event.
//
// The share is static: a node that gets more of the traffic to a host
// than its peers still gets only its 1/n of the host's caps. Keys are
// spread over owners by the ring, so the traffic to a host is too.

// PerNode is one node's share of l, a cluster-wide total, among n live
// members (n < 1 counts as 1): Rate divided by n (an infinite Rate stays
// infinite); Inflight and Burst divided by n rounded down, but at least
// 1. Rounding down keeps the sum of the shares within l whenever a cap
// is at least n; a smaller cap still gives every node 1, since a node
// with none could never call the host. Zero fields take their defaults
// first.
func (l Limits) PerNode(n int) Limits {
	l, n = l.withDefaults(), max(n, 1)
	return Limits{Inflight: perNode(l.Inflight, n), Rate: l.Rate / float64(n), Burst: perNode(l.Burst, n)}
}

func perNode(total, n int) int { return max(total/n, 1) }

// SetShare tells the Client it is one of n live members sharing the
// cluster-wide caps (n < 1 counts as 1), and applies the new share to
// every host's caps and the global one at once. Slots held and tokens
// spent are kept: after a shrink no new attempt starts until the attempts
// in flight are within the new share. Safe for concurrent use.
func (c *Client) SetShare(n int) {
	n = max(n, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == c.share {
		return
	}
	c.share = n
	c.global.resize(perNode(c.globalTotal, n))
	for key, h := range c.hosts {
		h.setShare(n, key, c.log)
	}
	c.log.Info("upstream caps shared among live members", "members", n, "global_inflight", perNode(c.globalTotal, n))
}

// Share is the number of live members SetShare last gave; 1 before.
func (c *Client) Share() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.share
}

// NodeLimits returns the caps the Client applies to host (keyed as
// hostkey.Of) now: its share of the host's cluster-wide Limits.
func (c *Client) NodeLimits(host string) Limits {
	c.mu.Lock()
	defer c.mu.Unlock()
	total, ok := c.table[host]
	if h, seen := c.hosts[host]; seen {
		total, ok = h.total, true
	}
	if !ok {
		total = DefaultLimits()
	}
	return total.PerNode(c.share)
}

// setShare applies the share of n members to the host's caps. The bucket
// keeps its tokens (rate.Limiter.SetLimit and SetBurst account up to now
// first); a smaller burst trims them at the next take.
// A host with a learned limit keeps it, clamped to the new share's
// bounds, instead (learner.rebound).
func (h *hostLimiter) setShare(n int, host string, log *slog.Logger) {
	if a := h.learn.Load(); a != nil {
		a.rebound(h.total, n)
		a.apply(h, host, log, true)
		return
	}
	l := h.total.PerNode(n)
	h.inflight.resize(l.Inflight)
	h.tokens.SetLimit(rate.Limit(l.Rate))
	h.tokens.SetBurst(l.Burst)
}

// setTotal gives the host new cluster-wide caps (a reload): a host that
// becomes adaptive starts learning at its ceilings, one that stops drops
// what it learned.
func (h *hostLimiter) setTotal(total Limits, share int) {
	h.total = total
	switch a := h.learn.Load(); {
	case total.Adaptive && a == nil:
		h.learn.Store(newLearner(total, share))
	case !total.Adaptive && a != nil:
		h.learn.Store(nil)
	}
}

// hostTable keys Config.Hosts by hostkey.Of, defaults filled; Validate has
// checked the keys.
func hostTable(hosts map[string]Limits) map[string]Limits {
	out := make(map[string]Limits, len(hosts))
	for origin, l := range hosts {
		if key, err := hostkey.Parse(origin); err == nil {
			out[key] = l.withDefaults()
		}
	}
	return out
}

// validHosts checks Config.Hosts: every key an origin, no host named
// twice, no negative cap.
func validHosts(hosts map[string]Limits) error {
	seen := make(map[string]string, len(hosts))
	for origin, l := range hosts {
		key, err := hostkey.Parse(origin)
		if err != nil {
			return fmt.Errorf("upstream: Hosts key %q %v", origin, err)
		}
		if other, dup := seen[key]; dup {
			return fmt.Errorf("upstream: Hosts keys %q and %q name one host, %s", other, origin, key)
		}
		seen[key] = origin
		if err := l.Validate(); err != nil {
			return fmt.Errorf("upstream: Hosts[%q]: %w", origin, err)
		}
	}
	return nil
}

// SetHosts replaces the cluster-wide caps (a reload of hosts: and
// upstream.max_inflight): the hosts' table and the global in-flight
// total (0: the default). Each host already called takes its new caps at once, at the
// current share (a host the table no longer lists goes back to the
// defaults); slots held and tokens spent are kept, as with SetShare.
// hosts is checked as Config.Hosts is; nothing changes on an error.
func (c *Client) SetHosts(hosts map[string]Limits, globalInflight int) error {
	if err := validHosts(hosts); err != nil {
		return err
	}
	if globalInflight < 0 {
		return fmt.Errorf("upstream: GlobalInflight %d < 0", globalInflight)
	}
	if globalInflight == 0 {
		globalInflight = DefaultConfig().GlobalInflight
	}
	table := hostTable(hosts)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.table, c.globalTotal = table, globalInflight
	c.global.resize(perNode(globalInflight, c.share))
	for key, h := range c.hosts {
		total, ok := table[key]
		if !ok {
			total = DefaultLimits()
		}
		h.setTotal(total, c.share)
		h.setShare(c.share, key, c.log)
	}
	c.log.Info("upstream caps reloaded", "hosts", len(table), "global_inflight", globalInflight)
	return nil
}
