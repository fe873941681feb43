package node

import (
	"testing"
)

// TestSurvivorsOfAKilledOwnerMeetOnItsSuccessor: the key's owner is gone
// (its port refuses connections) while gossip still counts it alive. The
// other two nodes do not each fetch the key: the one that is not next in
// the key's succession forwards to the one that is (which owns the key
// once the cluster notices, and holds its replica), and that one serves
// it itself. Through either node, one upstream call for the key.
func TestSurvivorsOfAKilledOwnerMeetOnItsSuccessor(t *testing.T) {
	t.Parallel()
	u := newItemsUpstream()
	c := newTestCluster(t, 3, withItems(t, u))
	const path, upGet = "/comments/items/31", "GET /api/items/31"
	owner, next := placementOf(c, path, "")
	other := 3 - owner - next
	defer refuseLink(t, c, other, owner)()
	defer refuseLink(t, c, next, owner)()

	a := c.get(other, path)
	a.expect(t, 200, "MISS")
	if got, want := a.header.Get("X-Levee-Owner"), c.cfgs[next].Node.Name; got != want {
		t.Fatalf("via node %d with its owner gone: served by %q, want its successor %q", other, got, want)
	}
	for _, via := range []int{next, other, next} {
		if a := c.get(via, path); a.status != 200 {
			t.Fatalf("via node %d: %d", via, a.status)
		}
	}
	if n := u.count(upGet); n != 1 {
		t.Fatalf("upstream saw %d GETs of the key through the two survivors, want 1", n)
	}
}
