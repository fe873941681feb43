package clustertls

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
)

// ErrShortSecret reports a secret shorter than MinSecretLen; GossipKey
// refuses it rather than derive a key an attacker could guess.
var ErrShortSecret = fmt.Errorf("clustertls: cluster.secret must be at least %d characters", MinSecretLen)

// GossipKeyLen is the length of a gossip key: AES-256, memberlist's
// strongest.
const GossipKeyLen = 32

// gossipSalt and gossipInfo domain-separate the gossip key from the CA key
// and every other key the secret derives (RFC 5869 §3.1, §3.2), so learning
// one says nothing about another. Bump the version to change the key; that
// is a rolling upgrade like the one from LegacyGossipKey.
const (
	gossipSalt = "levee gossip key"
	gossipInfo = "levee gossip aes-256 v1"
)

// GossipKey returns the AES-256 key that encrypts and authenticates
// memberlist gossip for secret: HKDF-SHA256, like the CA (Derive), with its
// own salt and info. Every node computes the same key from the same secret.
func GossipKey(secret string) ([]byte, error) {
	if len(secret) < MinSecretLen {
		return nil, ErrShortSecret
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), []byte(gossipSalt), gossipInfo, GossipKeyLen)
	if err != nil {
		return nil, fmt.Errorf("clustertls: derive gossip key: %w", err)
	}
	return key, nil
}

// LegacyGossipKey returns sha256(secret), the gossip key of the release
// before GossipKey. It is for upgrades only: a node still accepts it so
// that nodes of that release can be heard during a rolling upgrade, and
// sends with it only while cluster.legacy_gossip_key is on (step 1 of the
// upgrade in docs/security.md). A bare hash has no domain separation, so
// it is never the key of a new cluster.
func LegacyGossipKey(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}
