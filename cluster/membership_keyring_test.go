package cluster

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"log"
	"slices"
	"testing"

	"github.com/hashicorp/memberlist"
	"github.com/levee/levee/clustertls"
)

// The secrets of a rotation, both long enough for clustertls.
const (
	oldSecret = "old-cluster-secret-0123456789"
	newSecret = "new-cluster-secret-0123456789"
)

// gossipKeys is one node's key settings.
type gossipKeys struct {
	secret  string
	trusted []string
	legacy  bool
}

func (k gossipKeys) apply(c *MembershipConfig) {
	c.Secret, c.TrustedSecrets, c.LegacyGossipKey = k.secret, k.trusted, k.legacy
}

func mustGossipKey(t *testing.T, secret string) []byte {
	t.Helper()
	k, err := clustertls.GossipKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestGossipKeyringOrder: the first key is the one a node sends with;
// the rest are only read.
func TestGossipKeyringOrder(t *testing.T) {
	current, legacy := mustGossipKey(t, oldSecret), clustertls.LegacyGossipKey(oldSecret)
	trusted := mustGossipKey(t, newSecret)
	cases := []struct {
		name string
		keys gossipKeys
		want [][]byte
	}{
		{"secret", gossipKeys{secret: oldSecret}, [][]byte{current, legacy}},
		{"trusted", gossipKeys{secret: oldSecret, trusted: []string{newSecret}}, [][]byte{current, trusted, legacy}},
		{"legacy sends the hash", gossipKeys{secret: oldSecret, legacy: true}, [][]byte{legacy, current}},
		{"trusted twice and itself", gossipKeys{secret: oldSecret, trusted: []string{newSecret, oldSecret, newSecret}}, [][]byte{current, trusted, legacy}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "node-a")
			tc.keys.apply(&cfg)
			kr, err := cfg.gossipKeyring()
			if err != nil {
				t.Fatal(err)
			}
			if got := kr.GetKeys(); !slices.EqualFunc(got, tc.want, bytes.Equal) {
				t.Fatalf("keys = %x, want %x", got, tc.want)
			}
		})
	}
}

func TestMembershipConfigValidateSecrets(t *testing.T) {
	short := "too-short"
	cases := []struct {
		name      string
		keys      gossipKeys
		wantErr   bool
		wantShort bool
	}{
		{"no secret", gossipKeys{}, false, false},
		{"secret", gossipKeys{secret: oldSecret}, false, false},
		{"rotation", gossipKeys{secret: oldSecret, trusted: []string{newSecret}, legacy: true}, false, false},
		{"short secret", gossipKeys{secret: short}, true, true},
		{"short trusted secret", gossipKeys{secret: oldSecret, trusted: []string{newSecret, short}}, true, true},
		{"empty trusted secret", gossipKeys{secret: oldSecret, trusted: []string{""}}, true, true},
		{"trusted without secret", gossipKeys{trusted: []string{newSecret}}, true, false},
		{"legacy without secret", gossipKeys{legacy: true}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "node-a")
			tc.keys.apply(&cfg)
			err := cfg.Validate()
			if (err != nil) != tc.wantErr || err != nil && !errors.Is(err, ErrInvalidMembershipConfig) {
				t.Fatalf("Validate() = %v, wantErr %v", err, tc.wantErr)
			}
			if errors.Is(err, clustertls.ErrShortSecret) != tc.wantShort {
				t.Fatalf("Validate() = %v, want ErrShortSecret %v", err, tc.wantShort)
			}
		})
	}
}

// TestGossipKeyringDecidesWhoJoins: two nodes gossip when each reads the
// key the other sends with. Node b joins node a; in every case that must
// fail, a cannot read b's first message, so a never records b (had a been
// able to read b but not the reverse, a would list b until its probes
// failed: see TestPreviousReleaseNode).
func TestGossipKeyringDecidesWhoJoins(t *testing.T) {
	cases := []struct {
		name     string
		a, b     gossipKeys
		wantJoin bool
	}{
		{"same secret", gossipKeys{secret: oldSecret}, gossipKeys{secret: oldSecret}, true},
		{"different secret", gossipKeys{secret: oldSecret}, gossipKeys{secret: newSecret}, false},
		{"no secret", gossipKeys{secret: oldSecret}, gossipKeys{}, false},
		{"rotation step 1 mid-roll", gossipKeys{secret: oldSecret, trusted: []string{newSecret}}, gossipKeys{secret: oldSecret}, true},
		{"rotation step 2 mid-roll", gossipKeys{secret: oldSecret, trusted: []string{newSecret}}, gossipKeys{secret: newSecret, trusted: []string{oldSecret}}, true},
		{"rotation step 3 mid-roll", gossipKeys{secret: newSecret, trusted: []string{oldSecret}}, gossipKeys{secret: newSecret}, true},
		{"swap before step 1 finished", gossipKeys{secret: oldSecret}, gossipKeys{secret: newSecret, trusted: []string{oldSecret}}, false},
		{"upgrade step 1", gossipKeys{secret: oldSecret, legacy: true}, gossipKeys{secret: oldSecret, legacy: true}, true},
		{"upgrade step 2 mid-roll", gossipKeys{secret: oldSecret, legacy: true}, gossipKeys{secret: oldSecret}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			a := startNode(t, "node-a", tc.a.apply)
			b := startNode(t, "node-b", func(c *MembershipConfig) { tc.b.apply(c); seeds(a)(c) })
			if tc.wantJoin {
				for _, n := range []*testNode{a, b} {
					waitFor(t, converge, n.Local().Name+" to see 2 alive members", func() bool { return len(n.aliveNames()) == 2 })
				}
				return
			}
			// A few rejoin attempts and push/pull rounds had every chance
			// to merge them.
			waitFor(t, converge, "b to retry its seed 5 times", func() bool { return b.rejoinAttempts.Load() >= 5 })
			if got := b.aliveNames(); !slices.Equal(got, []string{"node-b"}) {
				t.Errorf("b sees %v, want only itself", got)
			}
			if _, ok := a.member("node-b"); ok {
				t.Errorf("a sees node-b: %s", fmtMembers(a.Members()))
			}
		})
	}
}

// startPreviousRelease starts a bare memberlist keyed like the release
// before the HKDF key: SecretKey = sha256(secret), computed here rather
// than by the code under test, and nothing else in its keyring. It has no
// metadata, which the keys do not care about. Cleanup shuts it down.
func startPreviousRelease(t *testing.T, name, secret string) *memberlist.Memberlist {
	t.Helper()
	c := memberlist.DefaultLANConfig()
	c.Name, c.BindAddr, c.BindPort, c.AdvertisePort = name, "127.0.0.1", 0, 0
	FastTimings().apply(c)
	key := sha256.Sum256([]byte(secret))
	c.SecretKey = key[:]
	c.Logger = log.New(memberlistLogWriter{testLogger(t, name).With("src", "memberlist")}, "", 0)
	ml, err := memberlist.Create(c)
	if err != nil {
		t.Fatalf("memberlist.Create(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	return ml
}

// TestPreviousReleaseNode is the rolling upgrade from the release that
// keyed gossip with a bare sha256(secret): a node of that release reads
// only that key.
func TestPreviousReleaseNode(t *testing.T) {
	t.Run("legacy gossip key on: they join", func(t *testing.T) {
		checkLeaks(t)
		old := startPreviousRelease(t, "node-o", oldSecret)
		n := startNode(t, "node-n", func(c *MembershipConfig) {
			gossipKeys{secret: oldSecret, legacy: true}.apply(c)
			c.Join = []string{old.LocalNode().Address()}
		})
		waitFor(t, converge, "both to see 2 alive members", func() bool {
			return len(n.aliveNames()) == 2 && old.NumMembers() == 2
		})
	})

	// Without the flag the new node sends under the HKDF key, which the
	// old one cannot read: its join is refused, and when the old node joins
	// instead, the new one hears it (it accepts the legacy key) but the old
	// one cannot read the reply, so its join fails and it never answers
	// the new node's probes, which then declares it failed. One-way
	// hearing is not a cluster.
	t.Run("legacy gossip key off: the old node cannot read the new", func(t *testing.T) {
		checkLeaks(t)
		old := startPreviousRelease(t, "node-o", oldSecret)
		n := startNode(t, "node-n", func(c *MembershipConfig) {
			gossipKeys{secret: oldSecret}.apply(c)
			c.Join = []string{old.LocalNode().Address()}
		})
		waitFor(t, converge, "n to retry its seed 5 times", func() bool { return n.rejoinAttempts.Load() >= 5 })
		if got := n.aliveNames(); !slices.Equal(got, []string{"node-n"}) {
			t.Errorf("n sees %v, want only itself", got)
		}
		if _, err := old.Join([]string{n.GossipAddr()}); err == nil {
			t.Error("the old node joined the new one, whose reply it cannot read")
		}
		waitFor(t, converge, "n to declare node-o failed", func() bool { return n.saw(EventFail, "node-o") })
		if !n.saw(EventJoin, "node-o") {
			t.Error("n never heard node-o, though it accepts the legacy key")
		}
		if got := old.NumMembers(); got != 1 {
			t.Errorf("the old node lists %d members, want only itself", got)
		}
	})
}
