package ring

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
)

func nodeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "node-" + strconv.Itoa(i+1)
	}
	return out
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("GET /v0/item/%d/comments?tenant=t%d", i, i%7)
	}
	return out
}

func mustRing(t testing.TB, cfg Config, members ...string) *Ring {
	t.Helper()
	r, err := New(cfg, members...)
	if err != nil {
		t.Fatalf("New(%v): %v", members, err)
	}
	return r
}

func owners(t testing.TB, r *Ring, ks []string) []string {
	t.Helper()
	out := make([]string, len(ks))
	for i, k := range ks {
		o, ok := r.Owner(k)
		if !ok {
			t.Fatalf("Owner(%q): ring empty", k)
		}
		out[i] = o
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*Config)
		wantErr bool
	}{
		{"default", func(*Config) {}, false},
		{"zero partitions", func(c *Config) { c.Partitions = 0 }, true},
		{"too many partitions", func(c *Config) { c.Partitions = MaxPartitions + 1 }, true},
		{"one virtual node", func(c *Config) { c.ReplicationFactor = 1 }, true},
		{"load one", func(c *Config) { c.Load = 1 }, true},
		{"load below one", func(c *Config) { c.Load = 0.5 }, true},
		{"load NaN", func(c *Config) { c.Load = math.NaN() }, true},
		{"load inf", func(c *Config) { c.Load = math.Inf(1) }, true},
		{"load just above one", func(c *Config) { c.Load = math.Nextafter(1, 2) }, false},
		{"small ring", func(c *Config) { c.Partitions = 7; c.ReplicationFactor = 2; c.Load = 1.01 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			if _, nerr := New(cfg, "a"); (nerr != nil) != tc.wantErr {
				t.Fatalf("New() = %v, wantErr %v", nerr, tc.wantErr)
			}
		})
	}
}

func TestEmptyRing(t *testing.T) {
	r := mustRing(t, DefaultConfig())
	if o, ok := r.Owner("k"); ok || o != "" {
		t.Fatalf("Owner on empty ring = %q, %v", o, ok)
	}
	if got := r.Replicas("k", 3); got != nil {
		t.Fatalf("Replicas on empty ring = %v", got)
	}
	if got := r.Shares(); len(got) != 0 {
		t.Fatalf("Shares on empty ring = %v", got)
	}
	if got := r.Members(); len(got) != 0 {
		t.Fatalf("Members on empty ring = %v", got)
	}
	// Emptied by removal: the library keeps stale loads, the ring must not.
	if err := r.Add("a"); err != nil {
		t.Fatal(err)
	}
	r.Remove("a")
	if _, ok := r.Owner("k"); ok {
		t.Fatal("Owner after removing the last member reports an owner")
	}
	if got := r.Shares(); len(got) != 0 {
		t.Fatalf("Shares after removing the last member = %v", got)
	}
}

func TestAddRemoveIdempotent(t *testing.T) {
	r := mustRing(t, DefaultConfig(), "a", "b", "a")
	if got := r.Members(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Members = %v", got)
	}
	ks := keys(2000)
	before := owners(t, r, ks)
	if err := r.Add("b"); err != nil {
		t.Fatal(err)
	}
	r.Remove("zzz")
	if got := owners(t, r, ks); !slices.Equal(got, before) {
		t.Fatal("no-op Add/Remove moved keys")
	}
	r.Remove("b")
	r.Remove("b")
	if got := r.Members(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Members after Remove = %v", got)
	}
}

func TestBadInput(t *testing.T) {
	cfg := Config{Partitions: 3, ReplicationFactor: 2, Load: 1.25}
	cases := []struct {
		name string
		run  func() error
		want error
	}{
		{"New empty name", func() error { _, err := New(cfg, "a", ""); return err }, ErrEmptyName},
		{"Add empty name", func() error { return mustRing(t, cfg).Add("") }, ErrEmptyName},
		{"New too many", func() error { _, err := New(cfg, "a", "b", "c", "d"); return err }, ErrTooManyMembers},
		{"Add too many", func() error { return mustRing(t, cfg, "a", "b", "c").Add("d") }, ErrTooManyMembers},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestPrefixNames covers names whose virtual-node keys would collide in the
// library ("n1"+"12" == "n11"+"2"); removing one must not panic or strand
// partitions.
func TestPrefixNames(t *testing.T) {
	members := []string{"n1", "n11", "n111", "n", "n2"}
	r := mustRing(t, DefaultConfig(), members...)
	for _, name := range members {
		r.Remove(name)
		sum := 0.0
		for _, s := range r.Shares() {
			sum += s
		}
		if len(r.Members()) > 0 && math.Abs(sum-1) > 1e-9 {
			t.Fatalf("after removing %q shares sum to %v", name, sum)
		}
	}
}

func TestPlacementStableAcrossInsertionOrder(t *testing.T) {
	cases := []struct {
		name    string
		members []string
	}{
		{"three", nodeNames(3)},
		{"five", nodeNames(5)},
		{"prefix names", []string{"n1", "n11", "n2", "n12"}},
	}
	ks := keys(10_000)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := owners(t, mustRing(t, DefaultConfig(), tc.members...), ks)
			rng := rand.New(rand.NewPCG(1, 2))
			for range 5 {
				shuffled := slices.Clone(tc.members)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				// Built one Add at a time, a different path than New.
				r := mustRing(t, DefaultConfig())
				for _, m := range shuffled {
					if err := r.Add(m); err != nil {
						t.Fatal(err)
					}
				}
				if got := owners(t, r, ks); !slices.Equal(got, want) {
					t.Fatalf("insertion order %v changed placement", shuffled)
				}
			}
		})
	}
}

func TestReplicas(t *testing.T) {
	r := mustRing(t, DefaultConfig(), nodeNames(5)...)
	cases := []struct {
		name string
		n    int
		want int
	}{
		{"zero", 0, 0},
		{"negative", -1, 0},
		{"one", 1, 1},
		{"three", 3, 3},
		{"all", 5, 5},
		{"clamped", 9, 5},
	}
	ks := keys(500)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range ks {
				got := r.Replicas(k, tc.n)
				if len(got) != tc.want {
					t.Fatalf("Replicas(%q, %d) = %v, want %d members", k, tc.n, got, tc.want)
				}
				if tc.want == 0 {
					continue
				}
				if owner, _ := r.Owner(k); got[0] != owner {
					t.Fatalf("Replicas(%q)[0] = %q, owner %q", k, got[0], owner)
				}
				if sorted := slices.Compact(slices.Sorted(slices.Values(got))); len(sorted) != len(got) {
					t.Fatalf("Replicas(%q) = %v has duplicates", k, got)
				}
			}
		})
	}
}

func TestReplicasStable(t *testing.T) {
	a := mustRing(t, DefaultConfig(), "e", "d", "c", "b", "a")
	b := mustRing(t, DefaultConfig(), "a", "b", "c", "d", "e")
	for _, k := range keys(1000) {
		if ra, rb := a.Replicas(k, 3), b.Replicas(k, 3); !slices.Equal(ra, rb) {
			t.Fatalf("Replicas(%q) = %v vs %v", k, ra, rb)
		}
	}
}

// moved returns the fraction of keys whose owner differs.
func moved(before, after []string) float64 {
	n := 0
	for i := range before {
		if before[i] != after[i] {
			n++
		}
	}
	return float64(n) / float64(len(before))
}

// TestKeysMoved measures how many keys change owner when one member joins
// (N→N+1) or leaves (N→N-1). Ideal consistent hashing moves 1/(N+1) on a
// join and 1/N on a leave; the bounded-load rule moves somewhat more because
// capped members spill partitions onto their neighbours.
func TestKeysMoved(t *testing.T) {
	ks := keys(10_000)
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			base := mustRing(t, DefaultConfig(), nodeNames(n)...)
			before := owners(t, base, ks)

			joined := mustRing(t, DefaultConfig(), nodeNames(n+1)...)
			join := moved(before, owners(t, joined, ks))

			left := mustRing(t, DefaultConfig(), nodeNames(n)[1:]...)
			leave := moved(before, owners(t, left, ks))

			t.Logf("N=%d: join moved %.3f (ideal %.3f), leave moved %.3f (ideal %.3f)",
				n, join, 1/float64(n+1), leave, 1/float64(n))
			lo, hi := 0.5/float64(n), 2/float64(n)
			for name, f := range map[string]float64{"join": join, "leave": leave} {
				if f < lo || f > hi {
					t.Errorf("%s moved %.3f of keys, want within [%.3f, %.3f]", name, f, lo, hi)
				}
			}
		})
	}
}

func TestSharesBalanced(t *testing.T) {
	for _, n := range []int{1, 3, 5, 12} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			cfg := DefaultConfig()
			shares := mustRing(t, cfg, nodeNames(n)...).Shares()
			if len(shares) != n {
				t.Fatalf("Shares has %d members, want %d: %v", len(shares), n, shares)
			}
			sum, avg := 0.0, 1/float64(n)
			for name, s := range shares {
				sum += s
				// The bounded-load cap, plus one partition of rounding.
				if limit := avg*cfg.Load + 1/float64(cfg.Partitions); s > limit {
					t.Errorf("%s owns %.3f, above the bounded-load cap %.3f", name, s, limit)
				}
				if s < avg/2 {
					t.Errorf("%s owns %.3f, under half the average %.3f", name, s, avg)
				}
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Fatalf("shares sum to %v", sum)
			}
		})
	}
}

// TestConcurrentUse runs lookups against membership changes; -race checks
// the locking.
func TestConcurrentUse(t *testing.T) {
	r := mustRing(t, DefaultConfig(), nodeNames(3)...)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				k := strconv.Itoa(g*1000 + i)
				if _, ok := r.Owner(k); !ok {
					t.Error("Owner: empty ring while members present")
					return
				}
				_ = r.Replicas(k, 2)
			}
		})
	}
	wg.Go(func() {
		for i := range 30 {
			name := "extra-" + strconv.Itoa(i%3)
			if err := r.Add(name); err != nil {
				t.Error(err)
			}
			_ = r.Shares()
			r.Remove(name)
		}
	})
	wg.Wait()
}

func BenchmarkOwner(b *testing.B) {
	r := mustRing(b, DefaultConfig(), nodeNames(5)...)
	ks := keys(1024)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, ok := r.Owner(ks[i%len(ks)]); !ok {
			b.Fatal("empty ring")
		}
	}
}

// TestReplicaIsNextOwner: the second replica of a key is exactly the node
// that owns it once the owner leaves, for every key and every owner.
func TestReplicaIsNextOwner(t *testing.T) {
	for _, n := range []int{3, 5} {
		members := make([]string, n)
		for i := range members {
			members[i] = fmt.Sprintf("n%d", i+1)
		}
		r, err := New(DefaultConfig(), members...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2000 {
			key := fmt.Sprintf("key-%d", i)
			reps := r.Replicas(key, 3)
			after, _ := New(DefaultConfig(), slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == reps[0] })...)
			if got, _ := after.Owner(key); got != reps[1] {
				t.Fatalf("N=%d %s: replicas %v, owner after %s leaves = %s", n, key, reps, reps[0], got)
			}
		}
	}
}
