package upstream

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The wait and cap hooks are recorded by waitObserver; the tests written
// before them ignore them.
func (o *recObserver) SlotWait(string, string, time.Duration) {}
func (o *recObserver) TokenWait(string, time.Duration)        {}
func (o *recObserver) Limited(string, string, string)         {}

// waitObserver records the admission waits and the refusals by cap.
type waitObserver struct {
	*recObserver
	mu      sync.Mutex
	slots   map[string][]time.Duration // by slot: "host", "global"
	tokens  []time.Duration
	limited []string // caps
}

func newWaitObserver() *waitObserver {
	return &waitObserver{recObserver: &recObserver{}, slots: map[string][]time.Duration{}}
}

func (o *waitObserver) SlotWait(_, slot string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.slots[slot] = append(o.slots[slot], d)
}

func (o *waitObserver) TokenWait(_ string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tokens = append(o.tokens, d)
}

func (o *waitObserver) Limited(_, _, cap string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.limited = append(o.limited, cap)
}

const apiHost = "https://api.example:443"

func TestPerNodeIsTheShareOfTheClusterTotal(t *testing.T) {
	tests := []struct {
		name  string
		total Limits
		n     int
		want  Limits
	}{
		{"one node keeps the whole", Limits{Inflight: 64, Rate: 50, Burst: 100}, 1, Limits{Inflight: 64, Rate: 50, Burst: 100}},
		{"no members counts as one", Limits{Inflight: 64, Rate: 50, Burst: 100}, 0, Limits{Inflight: 64, Rate: 50, Burst: 100}},
		{"three nodes round down", Limits{Inflight: 64, Rate: 60, Burst: 100}, 3, Limits{Inflight: 21, Rate: 20, Burst: 33}},
		{"a cap below the members still gives one", Limits{Inflight: 2, Rate: 1, Burst: 1}, 5, Limits{Inflight: 1, Rate: 0.2, Burst: 1}},
		{"zero fields take the defaults", Limits{}, 2, Limits{Inflight: 32, Rate: 25, Burst: 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.total.PerNode(tt.n); got != tt.want {
				t.Fatalf("%+v.PerNode(%d) = %+v, want %+v", tt.total, tt.n, got, tt.want)
			}
		})
	}
	if got := (Limits{Rate: math.Inf(1)}).PerNode(3).Rate; !math.IsInf(got, 1) {
		t.Fatalf("an unlimited rate shared by 3 = %v, want +Inf", got)
	}
}

// TestTheHostTableWinsOverTheFirstRequest is the bug behind the table:
// the first request to reach a host no longer decides its caps.
func TestTheHostTableWinsOverTheFirstRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{{status: 200, delay: 100 * time.Millisecond}}}
		c := newClient(t, Config{Transport: s, Hosts: map[string]Limits{"HTTPS://API.example": {Inflight: 2}}})
		// The request's own Limits would allow 64 at once.
		errs := doConcurrently(t, c, 10, func(int) string { return "https://api.example/x" }, Limits{Inflight: 64})
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if s.peak != 2 {
			t.Fatalf("peak %d concurrent attempts, want the table's 2", s.peak)
		}
		if got := c.NodeLimits(apiHost); got != (Limits{Inflight: 2, Rate: 50, Burst: 100}) {
			t.Fatalf("NodeLimits = %+v", got)
		}
	})
}

func TestHostsValidated(t *testing.T) {
	tests := []struct {
		name  string
		hosts map[string]Limits
		want  string
	}{
		{"not an origin", map[string]Limits{"https://api.example/v1": {}}, "origin only"},
		{"one host twice", map[string]Limits{"https://api.example": {}, "https://API.example:443/": {}}, "name one host"},
		{"negative cap", map[string]Limits{"https://api.example": {Burst: -1}}, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Config{Hosts: tt.hosts}.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestSetShareDividesTheHostsCaps: a Client told it is one of three
// applies a third of each cluster-wide cap, and the whole again alone.
func TestSetShareDividesTheHostsCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{{status: 200, delay: 100 * time.Millisecond}}}
		c := newClient(t, Config{Transport: s, Hosts: map[string]Limits{apiHost: {Inflight: 6, Rate: math.Inf(1)}}})
		oneHost := func(int) string { return "https://api.example/x" }
		c.SetShare(3)
		if err := errors.Join(doConcurrently(t, c, 12, oneHost, Limits{})...); err != nil {
			t.Fatal(err)
		}
		if s.peak != 2 || c.Share() != 3 {
			t.Fatalf("one of 3: peak %d, share %d; want 2 of the cluster's 6", s.peak, c.Share())
		}
		c.SetShare(1)
		s.peak = 0
		if err := errors.Join(doConcurrently(t, c, 12, oneHost, Limits{})...); err != nil {
			t.Fatal(err)
		}
		if s.peak != 6 {
			t.Fatalf("alone: peak %d, want the whole 6", s.peak)
		}
	})
}

// TestSetShareSpacesTokens: a cluster-wide 30/s with a burst of 3, shared
// by 3 nodes, is 10/s with a burst of 1 on this one.
func TestSetShareSpacesTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{status(200)}}
		c := newClient(t, Config{Transport: s, Hosts: map[string]Limits{apiHost: {Rate: 30, Burst: 3}}})
		c.SetShare(3)
		start := time.Now()
		if err := errors.Join(doConcurrently(t, c, 11, func(int) string { return "https://api.example/x" }, Limits{})...); err != nil {
			t.Fatal(err)
		}
		// One token at once, then one per 100ms.
		if got := time.Since(start); got != time.Second {
			t.Fatalf("11 attempts took %v, want 1s at 10/s after a burst of 1", got)
		}
	})
}

func TestSetShareSharesTheGlobalCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{{status: 200, delay: 100 * time.Millisecond}}}
		c := newClient(t, Config{Transport: s, GlobalInflight: 9})
		c.SetShare(3)
		manyHosts := func(i int) string { return "https://h" + string(rune('a'+i%6)) + ".example/x" }
		if err := errors.Join(doConcurrently(t, c, 18, manyHosts, Limits{})...); err != nil {
			t.Fatal(err)
		}
		if s.peak != 3 {
			t.Fatalf("peak %d across hosts, want 3: a third of the cluster's 9", s.peak)
		}
	})
}

// TestAShrinkKeepsTheSlotsInFlight: slots held when the share shrinks
// stay held and are given back as usual; no new one is granted until the
// holders are within the new size.
func TestAShrinkKeepsTheSlotsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(3)
		for range 3 {
			if err := s.acquire(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		s.resize(1)
		got := make(chan struct{})
		go func() {
			if s.acquire(t.Context()) == nil {
				close(got)
			}
		}()
		for want := 2; want >= 0; want-- {
			synctest.Wait()
			select {
			case <-got:
				t.Fatalf("granted with %d other slots still held, size 1", want+1)
			default:
			}
			s.release()
		}
		<-got
		if held, size := s.state(); held != 1 || size != 1 {
			t.Fatalf("held %d of %d, want 1 of 1", held, size)
		}
	})
}

func TestAWaiterWhoseContextEndsLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(1)
		if err := s.acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := s.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("acquire past the deadline = %v", err)
		}
		next := make(chan error, 1)
		go func() { next <- s.acquire(t.Context()) }()
		synctest.Wait()
		s.release()
		if err := <-next; err != nil {
			t.Fatal(err)
		}
		if held, _ := s.state(); held != 1 {
			t.Fatalf("held %d, want 1: the gone waiter must not keep a slot", held)
		}
	})
}

// TestWaitsAndRefusalsAreObserved: every admission reports its waits, and
// a refusal reports its cap, so a cap that binds shows.
func TestWaitsAndRefusalsAreObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{status(200)}}
		obs := newWaitObserver()
		c := newClient(t, Config{Transport: s, Observer: obs, Hosts: map[string]Limits{apiHost: {Rate: 2, Burst: 1}}})
		do := func(budget time.Duration) error {
			req := getReq(t, "https://api.example/x")
			req.Retry = Retry{Budget: budget}
			_, err := c.Do(t.Context(), req)
			return err
		}
		if err := do(time.Second); err != nil { // the burst's token
			t.Fatal(err)
		}
		if err := do(time.Second); err != nil { // waits 500ms for the next
			t.Fatal(err)
		}
		if err := do(100 * time.Millisecond); !errors.Is(err, ErrLimited) { // the next is 500ms away
			t.Fatalf("third call = %v, want refused by the bucket", err)
		}
		if want := []time.Duration{0, 500 * time.Millisecond, 0}; !slices.Equal(obs.tokens, want) {
			t.Errorf("token waits %v, want %v", obs.tokens, want)
		}
		if len(obs.slots[slotHost]) != 3 || len(obs.slots[slotGlobal]) != 2 {
			t.Errorf("slot waits %v, want 3 host and 2 global (the refused call never asked)", obs.slots)
		}
		if want := []string{capHostToken}; !slices.Equal(obs.limited, want) {
			t.Errorf("limited %v, want %v", obs.limited, want)
		}
	})
}

// pausingPacing pauses a host for real, as the cluster's pacing does.
type pausingPacing struct{ fakePacing }

func (p *pausingPacing) Pause(h string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.until[h] = time.Now().Add(d)
}

func TestTheRetryLogLineSaysUntilWhenTheHostIsPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := &pausingPacing{*newFakePacing()}
		s := &script{steps: []step{status(503), status(429, "Retry-After", "2"), status(200)}}
		c := newClient(t, Config{Transport: s, Pacing: p, Logger: slogJSON(&buf), Rand: fixedRand(0.5)})
		start := time.Now()
		if _, err := c.Do(t.Context(), getReq(t, "https://api.example/x")); err != nil {
			t.Fatal(err)
		}
		lines := decodeLines(t, &buf)
		if len(lines) != 2 {
			t.Fatalf("%d log lines, want 2:\n%s", len(lines), buf.String())
		}
		if v, ok := lines[0]["host_paused_until"]; ok {
			t.Errorf("a 503 without Retry-After logged host_paused_until %v", v)
		}
		got, _ := lines[1]["host_paused_until"].(string)
		until, err := time.Parse(time.RFC3339Nano, got)
		if want := start.Add(150*time.Millisecond + 2*time.Second); err != nil || !until.Equal(want) {
			t.Errorf("host_paused_until %q (%v), want %v: the 429's Retry-After from when it came", got, err, want)
		}
	})
}

// TestSetHostsReloadsTheCapsOfHostsAlreadyCalled: new cluster-wide caps
// take effect at once for a host already called, at the current share; a
// host the table drops goes back to the defaults; a bad table changes
// nothing.
func TestSetHostsReloadsTheCapsOfHostsAlreadyCalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{steps: []step{{status: 200, delay: 100 * time.Millisecond}}}
		c := newClient(t, Config{Transport: s, Hosts: map[string]Limits{apiHost: {Inflight: 6, Rate: math.Inf(1)}}})
		oneHost := func(int) string { return "https://api.example/x" }
		if err := errors.Join(doConcurrently(t, c, 12, oneHost, Limits{})...); err != nil {
			t.Fatal(err)
		}
		if err := c.SetHosts(map[string]Limits{apiHost: {Inflight: 3, Rate: math.Inf(1)}}, 0); err != nil {
			t.Fatal(err)
		}
		s.peak = 0
		if err := errors.Join(doConcurrently(t, c, 12, oneHost, Limits{})...); err != nil {
			t.Fatal(err)
		}
		if s.peak != 3 {
			t.Fatalf("after the reload: peak %d, want the new 3", s.peak)
		}
		if err := c.SetHosts(map[string]Limits{"not a url": {}}, 0); err == nil {
			t.Fatal("a bad table was accepted")
		}
		if got := c.NodeLimits(apiHost).Inflight; got != 3 {
			t.Fatalf("after a refused reload: inflight %d, want 3 kept", got)
		}
		if err := c.SetHosts(nil, 0); err != nil {
			t.Fatal(err)
		}
		if got, want := c.NodeLimits(apiHost), DefaultLimits(); got.Inflight != want.Inflight {
			t.Fatalf("a host no longer listed: %+v, want the defaults %+v", got, want)
		}
	})
}
