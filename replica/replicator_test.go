package replica

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/levee/levee/internal/testutil"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/store"
)

// fixedRing places every key on the same nodes, owner first.
type fixedRing []string

func (r fixedRing) Owner(string) (string, bool) { return r[0], len(r) > 0 }
func (r fixedRing) Replicas(_ string, n int) []string {
	return r[:min(n, len(r))]
}

// addrBook addresses every member at "<name>:80"; all are alive.
type addrBook []string

func (a addrBook) Member(name string) (Member, bool) {
	return Member{Name: name, Addr: name + ":80"}, true
}
func (a addrBook) Live() []Member {
	var out []Member
	for _, n := range a {
		out = append(out, Member{Name: n, Addr: n + ":80"})
	}
	return out
}

// fakeTransport answers from per-address state; down addresses fail.
type fakeTransport struct {
	mu        sync.Mutex
	down      map[string]bool
	forwards  int
	pushed    map[string][]*peer.Entry
	held      map[string]*peer.Entry // lookup answers by address
	tombs     map[string][]peer.Tombstone
	key       string                                     // the owner's Key in forward answers ("": none, as an older node)
	stored    int64                                      // and its Stored
	renew     func(*peer.Renew) ([]time.Duration, error) // Renew's answer; nil: a node that predates renewal
	renewals  []*peer.Renew
	renewedAt []string              // each renewal's address
	fresh     time.Duration         // FreshFor in forward answers (0: a minute)
	onForward func()                // runs in each forward, as the owner answers (nil: nothing)
	sent      []map[string][]string // each forward's header
}

func (f *fakeTransport) Forward(_ context.Context, addr string, req *peer.ForwardRequest) (*peer.ForwardResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forwards++
	f.sent = append(f.sent, req.Header)
	if f.onForward != nil {
		f.onForward()
	}
	fresh := f.fresh
	if fresh == 0 {
		fresh = time.Minute
	}
	return &peer.ForwardResponse{Status: 200, Body: []byte("from " + addr), Result: string(proxy.Miss),
		FreshFor: int64(fresh), Key: f.key, Stored: f.stored}, nil
}

func (f *fakeTransport) Renew(_ context.Context, addr string, m *peer.Renew) ([]time.Duration, error) {
	f.mu.Lock()
	f.renewals = append(f.renewals, m)
	f.renewedAt = append(f.renewedAt, addr)
	renew := f.renew
	f.mu.Unlock()
	if renew == nil || f.isDown(addr) {
		return nil, fmt.Errorf("%w: %s answered 404", peer.ErrUnreachable, addr)
	}
	return renew(m)
}

func (f *fakeTransport) isDown(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down[addr]
}

func (f *fakeTransport) Replicate(_ context.Context, addr string, e *peer.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[addr] {
		return fmt.Errorf("%w: %s down", peer.ErrUnreachable, addr)
	}
	f.pushed[addr] = append(f.pushed[addr], e)
	return nil
}

func (f *fakeTransport) Invalidate(_ context.Context, addr string, m *peer.Invalidate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[addr] {
		return fmt.Errorf("%w: %s down", peer.ErrUnreachable, addr)
	}
	f.tombs[addr] = append(f.tombs[addr], m.Tombstones...)
	return nil
}

func (f *fakeTransport) invalidations(addr string) []peer.Tombstone {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]peer.Tombstone(nil), f.tombs[addr]...)
}

func (f *fakeTransport) Lookup(_ context.Context, addr string, _ *peer.LookupRequest) (*peer.Entry, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.held[addr]
	return e, ok, nil
}

func (f *fakeTransport) setDown(addr string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[addr] = down
}

func (f *fakeTransport) pushes(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pushed[addr])
}

func newTestReplicator(t *testing.T, self string, rg fixedRing, tr *fakeTransport, clk *testutil.Clock) (*Replicator, *countingObserver) {
	t.Helper()
	obs := &countingObserver{}
	cfg := DefaultConfig()
	cfg.Self, cfg.Ring, cfg.Members, cfg.Transport = self, rg, addrBook(rg), tr
	cfg.Observer, cfg.Logger, cfg.Now = obs, testutil.Logger(t, slog.LevelDebug), clk.Now
	cfg.HandoffInterval = time.Hour // only MemberUp flushes in these tests
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(r.Close)
	return r, obs
}

func newFakeTransport() *fakeTransport {
	return &fakeTransport{down: map[string]bool{}, pushed: map[string][]*peer.Entry{}, held: map[string]*peer.Entry{},
		tombs: map[string][]peer.Tombstone{}}
}

func TestForwardFillsTheNearCache(t *testing.T) {
	tr := newFakeTransport()
	r, obs := newTestReplicator(t, "n2", fixedRing{"n1", "n2"}, tr, testutil.NewClock(time.Time{}))
	req := &proxy.Request{Method: http.MethodGet, Path: "/a", Header: http.Header{}}
	for range 2 {
		resp, err := r.Forward(context.Background(), "n1", "rk", req)
		if err != nil || string(resp.Body) != "from n1:80" {
			t.Fatalf("Forward = %v, %v", resp, err)
		}
	}
	if tr.forwards != 1 || obs.get("near/hit") != 1 || obs.get("forward/ok") != 1 {
		t.Fatalf("%d forwards, counts %v; want one forward, then a near-cache hit", tr.forwards, obs.n)
	}
}

// TestAClientsOwnHeaderIsCleanedBeforeItLeavesAndForAVariant: a request
// marked FromClient reaches the owner with its header end-to-end (no
// hop-by-hop or internal field, Forwarded set from the connection), and
// a near copy that varies is looked up under the cleaned header: a field
// the client's Connection names is not the client's variant.
func TestAClientsOwnHeaderIsCleanedBeforeItLeavesAndForAVariant(t *testing.T) {
	tr := newFakeTransport()
	r, obs := newTestReplicator(t, "n2", fixedRing{"n1", "n2"}, tr, testutil.NewClock(time.Time{}))
	client := func(kv ...string) *proxy.Request {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		req := &proxy.Request{Method: http.MethodGet, Path: "/a", Header: h}
		req.FromClient("192.0.2.7:5000", false)
		return req
	}
	if _, err := r.Forward(context.Background(), "n1", "rk", client("Keep-Alive", "5", "X-Levee-Owner", "n9",
		"X-Forwarded-For", "10.1.1.1", "Accept", "*/*")); err != nil {
		t.Fatal(err)
	}
	h := http.Header(tr.sent[0])
	if h.Get("Keep-Alive") != "" || h.Get("X-Levee-Owner") != "" || h.Get("X-Forwarded-For") != "192.0.2.7" || h.Get("Accept") != "*/*" {
		t.Fatalf("the owner got %v, want the end-to-end header", h)
	}
	en := http.Header{"Accept-Language": {"en"}}
	r.near.put(http.MethodGet, "rv", en, &proxy.Response{Status: 200, Header: http.Header{"Vary": {"Accept-Language"}},
		Body: []byte("en"), Result: proxy.Miss, FreshFor: time.Minute}, r.cfg.Now())
	if resp, err := r.Forward(context.Background(), "n1", "rv", client("Accept-Language", "en")); err != nil || string(resp.Body) != "en" {
		t.Fatalf("the client's own en variant: %v, %v; want the near copy", resp, err)
	}
	if resp, err := r.Forward(context.Background(), "n1", "rv", client("Connection", "Accept-Language", "Accept-Language", "en")); err != nil || string(resp.Body) == "en" {
		t.Fatalf("Accept-Language named in Connection: %v, %v; want no en variant", resp, err)
	}
	if obs.get("near/hit") != 1 {
		t.Fatalf("counts %v, want one near-cache hit", obs.n)
	}
}

// TestFailedPushIsHandedOffWhenTheMemberIsBack: a push to a replica that
// is down is kept and pushed again once the member comes back up.
func TestFailedPushIsHandedOffWhenTheMemberIsBack(t *testing.T) {
	tr := newFakeTransport()
	tr.setDown("n2:80", true)
	clk := testutil.NewClock(time.Time{})
	r, obs := newTestReplicator(t, "n1", fixedRing{"n1", "n2"}, tr, clk)
	now := clk.Now()
	r.OnStore("rk", "k", &store.Entry{Status: 200, StoredAt: now, FreshUntil: now.Add(time.Minute)})
	testutil.WaitFor(t, 5*time.Second, "the failed push to be kept", func() bool {
		return obs.get("sent/error") == 1 && r.Pending() == 1
	})
	tr.setDown("n2:80", false)
	r.MemberUp("n2")
	testutil.WaitFor(t, 5*time.Second, "the hand-off push", func() bool { return obs.get("handoff/ok") == 1 })
	if tr.pushes("n2:80") != 1 {
		t.Fatalf("n2 got %d pushes, want 1", tr.pushes("n2:80"))
	}
}

// TestRecoverTakesTheNewestLiveCopy: every other member is asked; a dead
// copy never wins, and the newest of the rest does.
func TestRecoverTakesTheNewestLiveCopy(t *testing.T) {
	tr := newFakeTransport()
	clk := testutil.NewClock(time.Time{})
	now := clk.Now().UnixNano()
	entry := func(stored, until int64, body string) *peer.Entry {
		return &peer.Entry{Key: "k", Status: 200, Body: []byte(body), StoredAt: stored, FreshUntil: until}
	}
	tr.held["n2:80"] = entry(now-3, now+int64(time.Minute), "older")
	tr.held["n3:80"] = entry(now-2, now+int64(time.Minute), "newest")
	tr.held["n4:80"] = entry(now-1, now-1, "dead")
	r, _ := newTestReplicator(t, "n1", fixedRing{"n1", "n2", "n3", "n4"}, tr, clk)
	got, ok := r.Recover(context.Background(), "rk", "k", http.Header{})
	if !ok || string(got.Body) != "newest" {
		t.Fatalf("Recover = %v, %v; want the newest live copy", got, ok)
	}
}

// TestCanRecoverNeedsALivePeer: a node alone (just restarted, before
// gossip found anyone) has nobody to ask for a newer copy.
func TestCanRecoverNeedsALivePeer(t *testing.T) {
	cases := []struct {
		name string
		ring fixedRing
		want bool
	}{
		{"alone", fixedRing{"n1"}, false},
		{"with a live peer", fixedRing{"n1", "n2"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newTestReplicator(t, "n1", tc.ring, newFakeTransport(), testutil.NewClock(time.Time{}))
			if got := r.CanRecover(); got != tc.want {
				t.Fatalf("CanRecover = %v, want %v", got, tc.want)
			}
		})
	}
}
