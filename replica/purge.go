package replica

import (
	"context"
	"sync"
	"time"

	"github.com/levee/levee/peer"
)

// Purges, cluster-wide (issue 14). An operator's purge is a write's
// removal (invalidate.go) with two differences: its scope may be a whole
// route (proxy.RouteScope: one tombstone above every key of the route), and
// the node that took the command sends it to every live member at once and
// waits for them, so that when the operator hears back, every member that
// answered has removed the scope. The rest (down, cut off, slow) are owed
// it as they are a write's tombstone, and get it when they come back.

// Purge is the engine's proxy.Config.OnPurge: an operator's purge removed
// scope from this node's cache at at. The scope leaves the near cache and
// the hand-off set here; its tombstone is sent to every live member, in
// parallel, each within PushTimeout and ctx, and stays owed to those that
// did not take it until until. It returns the answers removed from the
// near cache.
func (r *Replicator) Purge(ctx context.Context, scope string, at, until time.Time) int {
	t := tombstoneOf(scope, at, until)
	n := 0
	if r.near != nil {
		n = r.near.purge(scope, at, until)
	}
	r.handoff.drop(scope, t.At)
	if d := r.owed.add(t, nil); d > 0 {
		r.obs.Invalidation("sent", "dropped", d)
	}
	r.sendNow(ctx, t)
	return n
}

// sendNow sends t to every live member in parallel and waits for them;
// sendInvalidations records who took it, and the invalidation loop sends
// it again to the rest.
func (r *Replicator) sendNow(ctx context.Context, t peer.Tombstone) {
	var wg sync.WaitGroup
	for _, name := range r.liveOthers() {
		if m, ok := r.cfg.Members.Member(name); ok && m.Addr != "" {
			wg.Go(func() { r.sendInvalidations(ctx, m, []peer.Tombstone{t}) })
		}
	}
	wg.Wait()
}
