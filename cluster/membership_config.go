package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/levee/levee/clustertls"
)

// ErrInvalidMembershipConfig reports a MembershipConfig that Validate
// rejects.
var ErrInvalidMembershipConfig = errors.New("cluster: invalid membership config")

// Timings are memberlist's failure-detection and gossip knobs. Start from
// LANTimings (production) or FastTimings (tests on one host).
type Timings struct {
	// ProbeInterval is the time between failure-detection probes of one
	// random peer. LAN 1 s, fast 100 ms.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for an ack before asking
	// other peers to probe indirectly; about the p99 RTT. LAN 500 ms,
	// fast 50 ms.
	ProbeTimeout time.Duration
	// GossipInterval is the time between gossip rounds that spread
	// membership changes. LAN 200 ms, fast 20 ms.
	GossipInterval time.Duration
	// PushPullInterval is the time between full state syncs with one
	// random peer over TCP. LAN 30 s, fast 500 ms.
	PushPullInterval time.Duration
	// TCPTimeout bounds a stream connection (join, push/pull), so it also
	// bounds how long one unreachable join target can stall the rejoin loop
	// and Close. LAN 10 s, fast 500 ms.
	TCPTimeout time.Duration
	// SuspicionMult scales how long a peer stays suspect before it is
	// declared dead: SuspicionMult × max(1, log10(N)) × ProbeInterval.
	// LAN 4, fast 2.
	SuspicionMult int
	// SuspicionMaxTimeoutMult caps the suspicion time at this multiple of
	// the above when no peer confirms the suspicion (small clusters).
	// LAN 6, fast 3.
	SuspicionMaxTimeoutMult int
	// GossipToTheDeadTime is how long a dead peer still receives gossip
	// (so it can refute) before memberlist forgets it. LAN 30 s, fast 1 s.
	GossipToTheDeadTime time.Duration
	// DeadNodeReclaimTime is how long a peer must have been dead before
	// its name may come back from a different address (a restarted
	// container with a new IP or port). LAN 10 s, fast 100 ms.
	DeadNodeReclaimTime time.Duration
	// AwarenessMaxMultiplier caps how far a node that sees itself as
	// degraded (missed acks) stretches its probe interval. LAN 8, fast 2.
	AwarenessMaxMultiplier int
	// LeaveTimeout is how long a graceful stop waits for its leave
	// broadcast to go out (Membership.LeaveTimeout). When the whole
	// cluster stops at once the last nodes have nobody left to tell and
	// wait all of it. LAN 2 s, fast 300 ms.
	LeaveTimeout time.Duration
}

// LANTimings returns memberlist's LAN defaults plus a dead-node reclaim
// time. Failure detection takes about 5 s.
func LANTimings() Timings {
	return Timings{
		ProbeInterval:           time.Second,
		ProbeTimeout:            500 * time.Millisecond,
		GossipInterval:          200 * time.Millisecond,
		PushPullInterval:        30 * time.Second,
		TCPTimeout:              10 * time.Second,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 6,
		GossipToTheDeadTime:     30 * time.Second,
		DeadNodeReclaimTime:     10 * time.Second,
		AwarenessMaxMultiplier:  8,
		LeaveTimeout:            2 * time.Second,
	}
}

// FastTimings suits tests on 127.0.0.1: a crashed peer is declared dead in
// about one second.
func FastTimings() Timings {
	return Timings{
		ProbeInterval:           100 * time.Millisecond,
		ProbeTimeout:            50 * time.Millisecond,
		GossipInterval:          20 * time.Millisecond,
		PushPullInterval:        500 * time.Millisecond,
		TCPTimeout:              500 * time.Millisecond,
		SuspicionMult:           2,
		SuspicionMaxTimeoutMult: 3,
		GossipToTheDeadTime:     time.Second,
		DeadNodeReclaimTime:     100 * time.Millisecond,
		AwarenessMaxMultiplier:  2,
		LeaveTimeout:            300 * time.Millisecond,
	}
}

// Validate rejects non-positive timings.
func (t Timings) Validate() error {
	durations := map[string]time.Duration{
		"ProbeInterval": t.ProbeInterval, "ProbeTimeout": t.ProbeTimeout,
		"GossipInterval": t.GossipInterval, "PushPullInterval": t.PushPullInterval,
		"TCPTimeout": t.TCPTimeout, "GossipToTheDeadTime": t.GossipToTheDeadTime,
		"DeadNodeReclaimTime": t.DeadNodeReclaimTime, "LeaveTimeout": t.LeaveTimeout,
	}
	for name, d := range durations {
		if d <= 0 {
			return fmt.Errorf("%w: Timings.%s %v must be > 0", ErrInvalidMembershipConfig, name, d)
		}
	}
	if t.ProbeTimeout > t.ProbeInterval {
		return fmt.Errorf("%w: Timings.ProbeTimeout %v exceeds ProbeInterval %v", ErrInvalidMembershipConfig, t.ProbeTimeout, t.ProbeInterval)
	}
	if t.SuspicionMult < 1 || t.SuspicionMaxTimeoutMult < 1 || t.AwarenessMaxMultiplier < 1 {
		return fmt.Errorf("%w: Timings multipliers must be >= 1", ErrInvalidMembershipConfig)
	}
	return nil
}

// apply copies the timings onto a memberlist config.
func (t Timings) apply(c *memberlist.Config) {
	c.ProbeInterval = t.ProbeInterval
	c.ProbeTimeout = t.ProbeTimeout
	c.GossipInterval = t.GossipInterval
	c.PushPullInterval = t.PushPullInterval
	c.TCPTimeout = t.TCPTimeout
	c.SuspicionMult = t.SuspicionMult
	c.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	c.GossipToTheDeadTime = t.GossipToTheDeadTime
	c.DeadNodeReclaimTime = t.DeadNodeReclaimTime
	c.AwarenessMaxMultiplier = t.AwarenessMaxMultiplier
}

// MembershipConfig configures a Membership. Start from
// DefaultMembershipConfig.
type MembershipConfig struct {
	// Name is this node's unique name in the cluster. Required.
	Name string
	// BindAddr is the IP:port gossip listens on, UDP and TCP. Port 0 picks
	// a free port (read it back with GossipAddr). An empty host binds all
	// interfaces. Default "0.0.0.0:7946".
	BindAddr string
	// AdvertiseAddr is the IP:port peers use to reach this node; port 0
	// means the bound port. Default "": the bound address, or a private IP
	// of this host when bound to all interfaces. With a BindAddr port of 0
	// the bound port is always advertised.
	AdvertiseAddr string
	// HTTPAddr is the host:port of this node's HTTP API, advertised to
	// peers in node metadata. Default "".
	HTTPAddr string
	// RaftAddr is the host:port of this node's Raft transport, advertised
	// in node metadata. Default "" (no Raft).
	RaftAddr string
	// PeerAddr is the host:port peer messages reach this node at (its
	// internal port), advertised in node metadata. Default "" (none).
	PeerAddr string
	// Join lists seed gossip addresses (host:port) joined at Start and
	// again by the rejoin loop. Default none: this node starts a cluster.
	Join []string
	// Secret, when set, encrypts and authenticates gossip with AES-256
	// under clustertls.GossipKey(Secret), an HKDF of it (never a bare
	// hash). Two nodes gossip only when each can read the key the other
	// sends with, so a node with another secret, or none, cannot join. At
	// least clustertls.MinSecretLen characters. Default "": no encryption.
	Secret string
	// TrustedSecrets are further secrets whose gossip is still accepted
	// while the secret is rotated (docs/security.md): this node sends
	// under Secret's key and reads that key and each of these. Requires
	// Secret. Default none.
	TrustedSecrets []string
	// LegacyGossipKey makes this node send under sha256(Secret), the key
	// of the release before the HKDF one, and only accept the HKDF key:
	// step 1 of the upgrade from that release, whose nodes read nothing
	// else (docs/security.md). Either way a node with a Secret accepts the
	// legacy key, so that such nodes are heard during the roll. Requires
	// Secret. Default false.
	LegacyGossipKey bool
	// RejoinInterval is the period of the rejoin loop, which re-joins the
	// seeds and recently failed members so a healed partition merges back.
	// Default 30 s.
	RejoinInterval time.Duration
	// DeadRetention is how long a failed or departed member stays in
	// Members (with its state) and a failed one in the rejoin targets.
	// Default 1 h.
	DeadRetention time.Duration
	// Timings tune failure detection and gossip. Default LANTimings().
	Timings Timings
	// Logger receives this package's logs and memberlist's own, at the
	// level memberlist tagged them with. Default: discard.
	Logger *slog.Logger
}

// DefaultMembershipConfig returns the defaults documented on
// MembershipConfig; Name must still be set.
func DefaultMembershipConfig() MembershipConfig {
	return MembershipConfig{
		BindAddr:       "0.0.0.0:7946",
		RejoinInterval: 30 * time.Second,
		DeadRetention:  time.Hour,
		Timings:        LANTimings(),
	}
}

// Validate reports the first problem with the config.
func (c MembershipConfig) Validate() error {
	if c.Name == "" {
		return fmt.Errorf("%w: Name is required", ErrInvalidMembershipConfig)
	}
	if _, _, err := splitIPPort(c.BindAddr, false); err != nil {
		return fmt.Errorf("%w: BindAddr: %w", ErrInvalidMembershipConfig, err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitIPPort(c.AdvertiseAddr, true); err != nil {
			return fmt.Errorf("%w: AdvertiseAddr: %w", ErrInvalidMembershipConfig, err)
		}
	}
	if err := c.validateAddrs(); err != nil {
		return err
	}
	if err := c.validateSecrets(); err != nil {
		return err
	}
	if c.RejoinInterval <= 0 || c.DeadRetention <= 0 {
		return fmt.Errorf("%w: RejoinInterval %v and DeadRetention %v must be > 0", ErrInvalidMembershipConfig, c.RejoinInterval, c.DeadRetention)
	}
	return c.Timings.Validate()
}

// validateAddrs checks the advertised service addresses and the seeds, and
// that the metadata fits memberlist's limit (which it would enforce with a
// panic).
func (c MembershipConfig) validateAddrs() error {
	for field, addr := range map[string]string{"HTTPAddr": c.HTTPAddr, "RaftAddr": c.RaftAddr, "PeerAddr": c.PeerAddr} {
		if _, _, err := net.SplitHostPort(addr); addr != "" && err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidMembershipConfig, field, err)
		}
	}
	for _, seed := range c.Join {
		if _, _, err := net.SplitHostPort(seed); err != nil {
			return fmt.Errorf("%w: Join %q: %w", ErrInvalidMembershipConfig, seed, err)
		}
	}
	meta, err := encodeNodeMeta(nodeMeta{HTTPAddr: c.HTTPAddr, RaftAddr: c.RaftAddr, PeerAddr: c.PeerAddr, Leaving: true, Bootstrapped: true})
	if err != nil {
		return fmt.Errorf("%w: metadata: %w", ErrInvalidMembershipConfig, err)
	}
	if len(meta) > memberlist.MetaMaxSize {
		return fmt.Errorf("%w: HTTPAddr, RaftAddr and PeerAddr encode to %d bytes, over memberlist's %d", ErrInvalidMembershipConfig, len(meta), memberlist.MetaMaxSize)
	}
	return nil
}

// validateSecrets checks that every secret derives a gossip key.
func (c MembershipConfig) validateSecrets() error {
	if c.Secret == "" {
		if len(c.TrustedSecrets) > 0 || c.LegacyGossipKey {
			return fmt.Errorf("%w: TrustedSecrets and LegacyGossipKey need a Secret", ErrInvalidMembershipConfig)
		}
		return nil
	}
	if _, err := c.gossipKeyring(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMembershipConfig, err)
	}
	return nil
}

// gossipKeyring builds the keyring of a config with a Secret: the key this
// node sends with first, then every key it also reads, the trusted
// secrets' before the one an upgrade needs, since memberlist tries them in
// order. It is new on every call because memberlist owns and may change it.
func (c MembershipConfig) gossipKeyring() (*memberlist.Keyring, error) {
	current, err := clustertls.GossipKey(c.Secret)
	if err != nil {
		return nil, fmt.Errorf("Secret: %w", err)
	}
	var keys [][]byte
	for i, s := range c.TrustedSecrets {
		k, err := clustertls.GossipKey(s)
		if err != nil {
			return nil, fmt.Errorf("TrustedSecrets[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	primary, other := current, clustertls.LegacyGossipKey(c.Secret)
	if c.LegacyGossipKey {
		primary, other = other, primary
	}
	return memberlist.NewKeyring(append(keys, other), primary)
}

// splitIPPort parses "IP:port"; memberlist needs IP literals for binding
// and advertising. An empty host is allowed only when bindable (all
// interfaces).
func splitIPPort(addr string, needHost bool) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if host == "" && needHost {
		return "", 0, errors.New("missing IP")
	}
	if host != "" && net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("%q is not an IP address", host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", portStr)
	}
	return host, port, nil
}
