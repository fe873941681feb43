// Package clustertls gives a Levee cluster mutual TLS with no setup: the
// cluster's certificate authority is derived from cluster.secret (HKDF,
// then an Ed25519 key and a self-signed CA certificate every node computes
// byte for byte alike), and each node issues itself a short-lived
// certificate naming it at start, renewed while it runs. A connection
// between nodes is TLS 1.3 with both certificates checked against the CA,
// so only a holder of the secret can take part, and the peer's certificate
// name says which node it is.
//
// Several secrets can be trusted at once (the current one issues, older
// ones are still accepted), which is how the secret is rotated without
// downtime, as memberlist's keyring does for gossip: see docs/security.md.
package clustertls
