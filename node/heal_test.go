package node

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/demoupstream"
	"github.com/levee/levee/metrics"
)

// TestHealRestartedOwnerRecoversFromReplica: the owner of a warm key
// crashes while the upstream is down, the replica serves the key
// stale-if-error, then the owner restarts with an EMPTY cache and takes the
// key back. Every read through every node keeps answering 200 STALE with
// the original body: the owner asks the replica for its copy instead of
// answering 503.
func TestHealRestartedOwnerRecoversFromReplica(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, func(_ int, cfg *config.Config) {
		// Past fresh and stale within seconds: only stale-if-error serves.
		cfg.Routes[0].Cache.Fresh = config.Duration(500 * time.Millisecond)
		cfg.Routes[0].Cache.Stale = config.Duration(500 * time.Millisecond)
	})
	owner := c.ownerOf(0, hotPath, hotTenant)
	orig := c.get(owner, hotPath, "X-Tenant", hotTenant)
	orig.expect(t, 200, "MISS")
	rep := replicaOf(c, owner)
	c.waitFor(5*time.Second, "replication to the replica", func() bool {
		return metrics.Counter(c.nodes[rep].metrics.Replicated, "received", "ok") >= 2
	})
	if err := c.up.SetFault(demoupstream.Fault{Mode: demoupstream.ModeDown}); err != nil {
		t.Fatal(err)
	}
	c.crash(owner)
	c.waitConverged()
	readAll := func() { healReadAll(t, c, "STALE", orig.body) }
	c.waitFor(10*time.Second, "the survivors to serve the key stale", func() bool {
		a := c.get(rep, hotPath, "X-Tenant", hotTenant)
		return a.status == 200 && a.header.Get("X-Cache") == "STALE"
	})
	readAll()

	c.start(owner)
	c.waitFor(20*time.Second, "the restarted owner to own the key on every ring", func() bool {
		readAll()
		for _, i := range c.running() {
			if len(c.nodes[i].cluster.Ring.Members()) != 3 || c.ownerOf(i, hotPath, hotTenant) != owner {
				return false
			}
		}
		return true
	})
	for range 3 {
		readAll()
	}
	if got := metrics.Counter(c.nodes[owner].metrics.Replicated, "lookup", "hit"); got < 1 {
		t.Fatalf("restarted owner made %v successful replica lookups, want >= 1", got)
	}
}

// healReadAll reads the key once through every running node and fails
// unless each answers 200 with xcache and body.
func healReadAll(t *testing.T, c *testCluster, xcache string, body []byte) {
	t.Helper()
	for _, i := range c.running() {
		a := c.get(i, hotPath, "X-Tenant", hotTenant)
		if a.status != 200 || a.header.Get("X-Cache") != xcache || !bytes.Equal(a.body, body) {
			t.Fatalf("via node %d: %d X-Cache=%q owner=%q body %s; want 200 %s %s", i, a.status,
				a.header.Get("X-Cache"), a.header.Get("X-Levee-Owner"), a.body, xcache, body)
		}
	}
}

// healCluster is a 3-node cluster whose upstream changes its content every
// 200 ms, a warm key, its owner, the node next in line and the third node.
// Replication is off: a node that cannot reach the owner asks the
// replicas before the upstream (replicaFirst), and these tests need it to
// fetch a newer version itself, as it must when no replica holds a fresh
// copy.
func healCluster(t *testing.T, edits ...clusterOpt) (c *testCluster, up *demoupstream.Server, orig answer, owner, rep, third int) {
	t.Helper()
	ucfg := demoupstream.DefaultConfig()
	ucfg.ChangeEvery = 200 * time.Millisecond
	useUp, up := withUpstream(t, ucfg)
	noReplicas := func(_ int, cfg *config.Config) { cfg.Cluster.Replication = 0 }
	c = newTestCluster(t, 3, append(edits, useUp, noReplicas)...)
	owner = c.ownerOf(0, hotPath, hotTenant)
	orig = c.get(owner, hotPath, "X-Tenant", hotTenant)
	orig.expect(t, 200, "MISS")
	rep = replicaOf(c, owner)
	third = 3 - owner - rep
	return c, up, orig, owner, rep, third
}

// fallbackFetch fetches the key through node i while its owner is
// unreachable: served by node want (i itself, or the key's successor when
// the owner's port refuses) with a newer version than orig, fetched once.
func fallbackFetch(t *testing.T, c *testCluster, up *demoupstream.Server, i, want int, orig answer) answer {
	t.Helper()
	before := up.Calls(hotTenant, hotUpstreamKey)
	a := c.get(i, hotPath, "X-Tenant", hotTenant)
	a.expect(t, 200, "MISS")
	if got := a.header.Get("X-Levee-Owner"); got != c.cfgs[want].Node.Name || up.Calls(hotTenant, hotUpstreamKey) != before+1 {
		t.Fatalf("via node %d: served by %q with %d upstream calls, want node %d's one fetch", i, got, up.Calls(hotTenant, hotUpstreamKey)-before, want)
	}
	if bodyVersion(t, a.body) <= bodyVersion(t, orig.body) {
		t.Fatalf("fallback fetched version %d, not newer than %d", bodyVersion(t, a.body), bodyVersion(t, orig.body))
	}
	return a
}

func bodyVersion(t *testing.T, body []byte) int64 {
	t.Helper()
	var env struct {
		Version int64 `json:"version"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Version == 0 {
		t.Fatalf("body %s has no version (%v)", body, err)
	}
	return env.Version
}

// waitUpstreamMoved waits until the upstream's content (ChangeEvery 200 ms)
// has moved on from what was fetched at since, so a fetch now would get
// another version.
func waitUpstreamMoved(c *testCluster, since time.Time) {
	c.t.Helper()
	c.waitFor(5*time.Second, "the upstream's content to change", func() bool { return time.Since(since) > 500*time.Millisecond })
}

// TestHealHandoffToRestartedOwner: the owner crashes, the key's successor
// serves it with a newer version (the third node's forward, refused by the
// dead owner, goes there), the owner restarts empty and takes the key
// back. The hand-off set delivers the newer version to it on the rejoin,
// so every node answers that version, not one the owner would fetch anew.
func TestHealHandoffToRestartedOwner(t *testing.T) {
	t.Parallel()
	c, up, orig, owner, next, third := healCluster(t)
	waitUpstreamMoved(c, time.Now())
	c.crash(owner)
	// Straight after the crash the others still route to the dead owner:
	// its port refuses, and the successor serves the key itself.
	newer := fallbackFetch(t, c, up, third, next, orig)
	c.waitFor(5*time.Second, "the entry to enter the hand-off set", func() bool {
		return c.nodes[next].cluster.Replicator.Pending() >= 2 // Vary marker and variant
	})
	c.waitConverged()
	fetched := time.Now()
	c.start(owner)
	c.waitFor(20*time.Second, "the restarted owner to get the hand-off and own the key", func() bool {
		if metrics.Counter(c.nodes[owner].metrics.Replicated, "received", "ok") < 2 {
			return false
		}
		for _, i := range c.running() {
			if len(c.nodes[i].cluster.Ring.Members()) != 3 || c.ownerOf(i, hotPath, hotTenant) != owner {
				return false
			}
		}
		return true
	})
	waitUpstreamMoved(c, fetched)
	for range 3 {
		healReadAll(t, c, "HIT", newer.body)
	}
	if got := metrics.Counter(c.nodes[next].metrics.Replicated, "handoff", "ok"); got < 2 {
		t.Fatalf("hand-off pushes = %v, want >= 2", got)
	}
}

// TestHealHandoffAfterLinkCut is the partition itself: the owner stays up
// with its older copy while the link from the third node to it is cut. The
// third node serves a newer version; once the link heals, the periodic
// hand-off gives the owner that version and no node goes back to the older.
func TestHealHandoffAfterLinkCut(t *testing.T) {
	t.Parallel()
	// No near cache: a forward that got through must not be answered
	// from it on the next attempt.
	c, _, orig, owner, _, third := healCluster(t, func(_ int, cfg *config.Config) { cfg.Cluster.NearCache.MaxBytes = 0 })
	waitUpstreamMoved(c, time.Now())
	// A late gossip update may rewrite the member record under the cut;
	// then the forward gets through (the owner answers its fresh copy,
	// nothing changes) and the cut is made again.
	var restore func()
	var newer answer
	c.waitFor(10*time.Second, "a fetch over the cut link", func() bool {
		restore = cutLink(t, c, third, owner)
		a := c.get(third, hotPath, "X-Tenant", hotTenant)
		if a.header.Get("X-Levee-Owner") == c.cfgs[third].Node.Name {
			newer = a
			return true
		}
		restore()
		return false
	})
	if xc := newer.header.Get("X-Cache"); xc != "MISS" || bodyVersion(t, newer.body) <= bodyVersion(t, orig.body) {
		t.Fatalf("third node served %s version %d, want a newer version than %d", xc, bodyVersion(t, newer.body), bodyVersion(t, orig.body))
	}
	// The split is real: the owner still answers its older copy.
	if a := c.get(owner, hotPath, "X-Tenant", hotTenant); !bytes.Equal(a.body, orig.body) {
		t.Fatalf("owner answered %s during the cut, want its older copy %s", a.body, orig.body)
	}
	restore()
	c.waitFor(10*time.Second, "every node to answer the newer version", func() bool {
		for _, i := range c.running() {
			if a := c.get(i, hotPath, "X-Tenant", hotTenant); !bytes.Equal(a.body, newer.body) {
				return false
			}
		}
		return true
	})
	for range 3 {
		healReadAll(t, c, "HIT", newer.body)
	}
}

// cutLink makes node from's calls to node to fail as over a cut link
// (no route to host) until the returned function heals it.
func cutLink(t *testing.T, c *testCluster, from, to int) (heal func()) {
	t.Helper()
	addr := c.nodes[to].internal.Addr().String()
	c.links[from].block(addr, syscall.EHOSTUNREACH)
	return func() { c.links[from].block(addr, 0) }
}

// refuseLink makes node from's calls to node to be refused, as a host
// whose Levee process is gone refuses them (connection refused), while
// gossip still counts it alive, until the returned function heals it.
func refuseLink(t *testing.T, c *testCluster, from, to int) (heal func()) {
	t.Helper()
	addr := c.nodes[to].internal.Addr().String()
	c.links[from].block(addr, syscall.ECONNREFUSED)
	return func() { c.links[from].block(addr, 0) }
}

// linkCut is a node's peer transport that fails calls to blocked
// addresses with the dial error a cut link (or a gone process) gives.
type linkCut struct {
	base    http.RoundTripper
	mu      sync.Mutex
	blocked map[string]syscall.Errno
}

func newLinkCut() *linkCut { return &linkCut{blocked: map[string]syscall.Errno{}} }

// wrap is Options.WrapPeerTransport: the link cut sits in front of the
// node's own peer transport (each restart gives it a new one).
func (l *linkCut) wrap(base http.RoundTripper) http.RoundTripper {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.base = base
	return l
}

// block makes calls to addr fail with errno; 0 heals.
func (l *linkCut) block(addr string, errno syscall.Errno) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errno == 0 {
		delete(l.blocked, addr)
		return
	}
	l.blocked[addr] = errno
}

func (l *linkCut) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	errno, cut := l.blocked[r.URL.Host]
	l.mu.Unlock()
	if cut {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errno}
	}
	l.mu.Lock()
	base := l.base
	l.mu.Unlock()
	return base.RoundTrip(r)
}

// TestARestartedOwnerAsksItsPeersBeforeServingItsSavedCopy: the owner
// stops (its cache file keeps the version it had), the key's successor
// takes the key and fetches a newer version (replication off: nothing is
// pushed to the owner), and the owner restarts. Taking the key back, the owner must not serve the copy from its file, which is older
// than what clients read through the successor: it asks its peers first
// (soak run 5 at 1,095 s: a restarted owner answered versions its
// successor had replaced, 1.3 s before the hand-off reached it).
func TestARestartedOwnerAsksItsPeersBeforeServingItsSavedCopy(t *testing.T) {
	t.Parallel()
	c, up, orig, owner, next, third := healCluster(t)
	waitUpstreamMoved(c, time.Now())
	c.stop(owner) // graceful: its cache file holds orig
	c.waitConverged()
	var newer answer
	c.waitFor(10*time.Second, "the successor to own the key and fetch a newer version", func() bool {
		newer = c.get(third, hotPath, "X-Tenant", hotTenant)
		return newer.status == 200 && newer.header.Get("X-Levee-Owner") == c.cfgs[next].Node.Name &&
			bodyVersion(t, newer.body) > bodyVersion(t, orig.body)
	})
	before := up.Calls(hotTenant, hotUpstreamKey)
	c.start(owner)
	c.waitFor(20*time.Second, "the restarted owner to own the key on every ring", func() bool {
		for _, i := range c.running() {
			if len(c.nodes[i].cluster.Ring.Members()) != 3 || c.ownerOf(i, hotPath, hotTenant) != owner {
				return false
			}
		}
		return true
	})
	for _, i := range []int{owner, third, next} {
		a := c.get(i, hotPath, "X-Tenant", hotTenant)
		if a.status != 200 || bodyVersion(t, a.body) < bodyVersion(t, newer.body) {
			t.Fatalf("via node %d: %d %s version %d, want at least the successor's %d (the saved copy is %d)", i, a.status,
				a.header.Get("X-Cache"), bodyVersion(t, a.body), bodyVersion(t, newer.body), bodyVersion(t, orig.body))
		}
	}
	if calls := up.Calls(hotTenant, hotUpstreamKey) - before; calls != 0 {
		t.Fatalf("%d upstream calls after the restart, want the successor's copy", calls)
	}
}
