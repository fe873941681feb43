package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/metrics"
)

// Issue 14, purge: DELETE /-/cache through any node removes a URL (every
// method and variant, one tenant) or a whole route from every node's
// cache, near caches included, and its tombstones keep hand-off and
// recovery from bringing it back. Checked black-box through HTTP, with
// each node's cache read in-process to see copies no request would reach.

// purgeVia sends DELETE /-/cache?query through node i with auth as the
// Authorization header ("" for none).
func purgeVia(c *testCluster, i int, query, auth string) answer {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodDelete, c.url(i, "/-/cache?"+query), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("purge %s via node %d: %v", query, i, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("purge %s via node %d: reading body: %v", query, i, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// purged sends an authorised purge through node i and returns its count.
func purged(c *testCluster, i int, query string) int {
	c.t.Helper()
	a := purgeVia(c, i, query, "Bearer "+adminToken)
	var res struct {
		Purged *int `json:"purged"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &res) != nil || res.Purged == nil {
		c.t.Fatalf("purge %s via node %d: %d %s, want 200 {\"purged\": N}", query, i, a.status, a.body)
	}
	return *res.Purged
}

// pathQuery is the purge query of path (below /comments/) for tenant.
func pathQuery(path, tenant string) string {
	q := url.Values{"path": {path}}
	if tenant != "" {
		q.Set("tenant", tenant)
	}
	return q.Encode()
}

// oldAnswers counts the answers node i's cache holds of route, stored
// before t; rest, when set, limits it to that URL (the path below the
// route's prefix) for tenant.
func oldAnswers(c *testCluster, i int, route, rest, tenant string, t time.Time) int {
	frag := "\x00" + rest + "?\x00t=" + tenant
	n := 0
	for k, e := range c.nodes[i].cache.All() {
		if e.Status == 0 || !e.StoredAt.Before(t) || !strings.HasPrefix(k, route+"\x00") {
			continue
		}
		if rest == "" || strings.HasSuffix(k, frag) || strings.Contains(k, frag+"\x00") {
			n++
		}
	}
	return n
}

// placementOf returns the owner of path (route comments) for tenant and
// its replica, as node 0's ring sees them.
func placementOf(c *testCluster, path, tenant string) (owner, replica int) {
	c.t.Helper()
	n := c.nodes[0]
	rt, _ := n.engine.Route("comments")
	key, err := n.engine.RoutingKey(reqFor(rt.Prefix, path, rt.TenantHeader, tenant))
	if err != nil {
		c.t.Fatal(err)
	}
	reps := n.cluster.Ring.Replicas(key, 2)
	if len(reps) != 2 {
		c.t.Fatalf("placement of %s: %v", path, reps)
	}
	return indexOf(c, reps[0]), indexOf(c, reps[1])
}

// TestPurgeOfAPathRemovesEveryCopy: a URL cached on its owner, its
// replica and in a third node's near cache is purged through a fourth
// node. Every copy goes (GET and HEAD answers), another tenant's stays,
// and through every node the next read is a MISS that calls the upstream
// again. The endpoint refuses a caller without the token and a bad query.
func TestPurgeOfAPathRemovesEveryCopy(t *testing.T) {
	t.Parallel()
	u := newItemsUpstream()
	c := newTestCluster(t, 4, withItems(t, u))
	const path, rest, tenant = "/comments/items/7", "items/7", "acme"
	upGet := "GET /api/items/7"
	owner, rep := placementOf(c, path, tenant)
	var rest2 []int // the two nodes that neither own nor replicate the key
	for _, i := range c.running() {
		if i != owner && i != rep {
			rest2 = append(rest2, i)
		}
	}
	near, via := rest2[0], rest2[1]
	c.get(near, path, "X-Tenant", tenant).expect(t, 200, "MISS")
	send(c, near, http.MethodHead, path, "X-Tenant", tenant)
	c.get(owner, path, "X-Tenant", "globex").expect(t, 200, "MISS")
	c.waitFor(10*time.Second, "the replica to hold the answers", func() bool {
		return oldAnswers(c, rep, "comments", rest, tenant, time.Now()) == 2
	})
	// The near cache keeps an answer 1 s at most: read once more to put it
	// there now (the owner's hit), then see it answer.
	nearAt := time.Now()
	c.get(near, path, "X-Tenant", tenant).expect(t, 200, "HIT")
	hit := c.get(near, path, "X-Tenant", tenant)
	if !strings.Contains(hit.header.Get("Cache-Status"), "near-cache") {
		t.Fatalf("read through node %d: Cache-Status %q, want a near-cache hit", near, hit.header.Get("Cache-Status"))
	}

	before := time.Now()
	if n := purged(c, via, pathQuery(path, tenant)); n != 0 {
		t.Fatalf("purged %d through node %d, which held nothing: N counts what the answering node removed", n, via)
	}
	for _, i := range c.running() {
		if n := oldAnswers(c, i, "comments", rest, tenant, before); n != 0 {
			t.Fatalf("node %d still holds %d answers of the purged URL", i, n)
		}
	}
	a := c.get(near, path, "X-Tenant", tenant)
	if since := time.Since(nearAt); since < time.Second {
		a.expect(t, 200, "MISS")
	} else { // the near copy may have ended by itself: the MISS proves less
		t.Logf("near-cache check inconclusive: %v between the near copy and the read after the purge", since)
	}
	if n := u.count(upGet); n != 3 { // tenant acme twice, globex once
		t.Fatalf("upstream saw %d GETs, want 3", n)
	}
	c.get(owner, path, "X-Tenant", "globex").expect(t, 200, "HIT")

	// Through every node, the read after a purge is a miss; a purge through
	// the owner counts the answer it held.
	for _, i := range c.running() {
		calls := u.count(upGet)
		if n := purged(c, i, pathQuery(path, tenant)); i == owner && n != 1 {
			t.Fatalf("purge through the owner counted %d answers, want the 1 it held", n)
		}
		c.get(i, path, "X-Tenant", tenant).expect(t, 200, "MISS")
		if u.count(upGet) != calls+1 {
			t.Fatalf("read through node %d after the purge did not call the upstream", i)
		}
	}

	for _, tt := range []struct {
		name, query, auth string
		want              int
	}{
		{"no token", pathQuery(path, tenant), "", 401},
		{"wrong token", pathQuery(path, tenant), "Bearer nope", 401},
		{"neither path nor route", "", "Bearer " + adminToken, 400},
		{"unknown route", "route=nope", "Bearer " + adminToken, 400},
		{"no route serves the path", pathQuery("/elsewhere/x", ""), "Bearer " + adminToken, 400},
		{"dot segment", pathQuery("/comments/a/%2e%2e/b", ""), "Bearer " + adminToken, 400},
	} {
		t.Run(tt.name, func(t *testing.T) { purgeVia(c, via, tt.query, tt.auth).expectProblem(t, tt.want) })
	}
}

// withOtherRoute adds a second route, "other" at /other/, to the same
// upstream as the first (edits run in order: put it after withItems).
func withOtherRoute(_ int, cfg *config.Config) {
	rt := cfg.Routes[0]
	rt.Name, rt.Prefix = "other", "/other/"
	cfg.Routes = append(cfg.Routes, rt)
}

// TestPurgeOfARouteEmptiesItOnEveryNode: a route's purge through one node
// removes every answer of the route from every node (owners, replicas,
// near caches), every URL and tenant, while another route's answers stay
// where they were.
func TestPurgeOfARouteEmptiesItOnEveryNode(t *testing.T) {
	t.Parallel()
	u := newItemsUpstream()
	c := newTestCluster(t, 3, withItems(t, u), withOtherRoute)
	const n = 6
	for k := range n {
		c.get(k%3, fmt.Sprintf("/comments/items/%d", k), "X-Tenant", fmt.Sprint("t", k%2)).expect(t, 200, "MISS")
		c.get(k%3, fmt.Sprintf("/other/items/%d", 100+k)).expect(t, 200, "MISS")
	}
	c.waitFor(10*time.Second, "every answer on its owner and its replica", func() bool {
		var comments, other int
		for _, i := range c.running() {
			comments += oldAnswers(c, i, "comments", "", "", time.Now())
			other += oldAnswers(c, i, "other", "", "", time.Now())
		}
		return comments == 2*n && other == 2*n
	})
	kept := map[int]int{}
	for _, i := range c.running() {
		kept[i] = oldAnswers(c, i, "other", "", "", time.Now())
	}

	before := time.Now()
	if got := purged(c, 1, "route=comments"); got < 1 {
		t.Fatalf("node 1 purged %d answers, want the ones it held", got)
	}
	for _, i := range c.running() {
		if got := oldAnswers(c, i, "comments", "", "", before); got != 0 {
			t.Fatalf("node %d still holds %d answers of the purged route", i, got)
		}
		if got := oldAnswers(c, i, "other", "", "", before); got != kept[i] {
			t.Fatalf("node %d holds %d answers of the other route, had %d", i, got, kept[i])
		}
	}
	for k := range n {
		c.get((k+1)%3, fmt.Sprintf("/comments/items/%d", k), "X-Tenant", fmt.Sprint("t", k%2)).expect(t, 200, "MISS")
		if calls := u.count(fmt.Sprintf("GET /api/items/%d", k)); calls != 2 {
			t.Fatalf("items/%d: %d upstream calls, want 2 (cached, purged, fetched again)", k, calls)
		}
		c.get((k+1)%3, fmt.Sprintf("/other/items/%d", 100+k)).expect(t, 200, "HIT")
	}
}

// TestPurgeIsNotUndoneByHandoffOrRecovery: a node cut off from a key's
// owner serves the key itself and keeps its copy to hand off; the purge
// cannot reach it either. Its copy must not come back: not recovered by
// the owner while the upstream is down, not handed off once the link
// heals; and once it can be reached, the purge removes it there too.
func TestPurgeIsNotUndoneByHandoffOrRecovery(t *testing.T) {
	t.Parallel()
	u := newItemsUpstream()
	c := newTestCluster(t, 3, withItems(t, u))
	const path, rest = "/comments/items/9", "items/9"
	owner, rep := placementOf(c, path, "")
	cut := 3 - owner - rep
	healOwner := cutLink(t, c, cut, owner)
	defer healOwner()
	a := c.get(cut, path)
	a.expect(t, 200, "MISS")
	if got := a.header.Get("X-Levee-Owner"); got != c.cfgs[cut].Node.Name {
		t.Fatalf("node %d did not serve the key itself (owner %q)", cut, got)
	}
	healCut := cutLink(t, c, rep, cut)
	defer healCut()

	before := time.Now()
	purged(c, rep, pathQuery(path, ""))
	if oldAnswers(c, cut, "comments", rest, "", before) != 1 {
		t.Fatalf("node %d, cut off, should still hold its copy", cut)
	}

	u.setDown(true) // the owner has nothing and cannot fetch: it asks the others, and the cut node answers
	if a := c.get(owner, path); a.status == http.StatusOK {
		t.Fatalf("the owner served the purged answer while the upstream is down: X-Cache %q Cache-Status %q",
			a.header.Get("X-Cache"), a.header.Get("Cache-Status"))
	}
	om := c.nodes[owner].metrics
	if metrics.Counter(om.Replicated, "lookup", "shadowed") < 1 {
		t.Fatal("the owner did not see (and refuse) the cut node's purged copy")
	}
	u.setDown(false)

	refused := metrics.Counter(om.Replicated, "received", "stale")
	healOwner()
	c.waitFor(10*time.Second, "the cut node's hand-off to reach the owner", func() bool {
		return metrics.Counter(om.Replicated, "received", "stale") > refused
	})
	if got := oldAnswers(c, owner, "comments", rest, "", before); got != 0 {
		t.Fatalf("the owner took back %d purged answers from the hand-off", got)
	}
	c.get(owner, path).expect(t, 200, "MISS")

	healCut()
	c.waitFor(10*time.Second, "the purge to reach the node that was cut off", func() bool {
		return oldAnswers(c, cut, "comments", rest, "", before) == 0
	})
}
