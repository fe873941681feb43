package clustertls

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func mustGossipKey(t *testing.T, s string) []byte {
	t.Helper()
	k, err := GossipKey(s)
	if err != nil {
		t.Fatalf("GossipKey(%q): %v", s, err)
	}
	return k
}

// TestGossipKeyIsPinned: every node of a cluster, whatever release it
// runs, must compute the same bytes, so a change to the salt, the info or
// the legacy hash is a wire break and must fail here. The vectors were
// checked against an independent HKDF (RFC 5869) and sha256sum.
func TestGossipKeyIsPinned(t *testing.T) {
	cases := []struct {
		name string
		key  []byte
		want string
	}{
		{"hkdf", mustGossipKey(t, secret), "051687b2e45616599d9868563575743c941e3f05259b3cd4867bd29fbc7b76f9"},
		{"legacy sha256", LegacyGossipKey(secret), "64c0fa44ac9a7ddd5583455b569586419e7da0ec583041f071a2f1c301394a72"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := hex.EncodeToString(tc.key); got != tc.want {
				t.Fatalf("key = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestGossipKeyIsDeterministicAndSeparated: the same secret gives the same
// AES-256 key, and it shares nothing with another secret's key, the CA's
// seed or the bare hash the previous release used.
func TestGossipKeyIsDeterministicAndSeparated(t *testing.T) {
	key := mustGossipKey(t, secret)
	if len(key) != GossipKeyLen || GossipKeyLen != 32 {
		t.Fatalf("key is %d bytes, want 32 (AES-256)", len(key))
	}
	cases := []struct {
		name      string
		other     []byte
		wantEqual bool
	}{
		{"same secret again", mustGossipKey(t, secret), true},
		{"another secret", mustGossipKey(t, secret+"x"), false},
		{"CA seed of the same secret", mustDerive(t, secret).key.Seed(), false},
		{"legacy key of the same secret", LegacyGossipKey(secret), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := bytes.Equal(key, tc.other); got != tc.wantEqual {
				t.Fatalf("equal = %v, want %v", got, tc.wantEqual)
			}
		})
	}
}

func TestGossipKeyRefusesShortSecrets(t *testing.T) {
	cases := []struct {
		name    string
		secret  string
		wantErr bool
	}{
		{"empty", "", true},
		{"one short", strings.Repeat("s", MinSecretLen-1), true},
		{"minimum", strings.Repeat("s", MinSecretLen), false},
		{"test secret", secret, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key, err := GossipKey(tc.secret)
			if tc.wantErr {
				if !errors.Is(err, ErrShortSecret) || key != nil {
					t.Fatalf("GossipKey = %x, %v; want nil, ErrShortSecret", key, err)
				}
				return
			}
			if err != nil || len(key) != GossipKeyLen {
				t.Fatalf("GossipKey = %x, %v", key, err)
			}
		})
	}
}
