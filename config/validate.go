package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/levee/levee/cachefile"
	"github.com/levee/levee/connlimit"
	"github.com/levee/levee/ring"
)

// Validate checks every rule and returns all problems joined with
// errors.Join, each a *FieldError naming its key path; nil when c is valid.
// It does not modify c. It reads each route's tls.ca_file.
func (c *Config) Validate() error {
	v := &validator{}
	v.node(&c.Node)
	v.gc(c)
	v.cluster(&c.Cluster)
	v.credentials(c)
	v.writeTimeout(&c.Node, &c.Cluster)
	v.positiveSize("cache.max_bytes", c.Cache.MaxBytes)
	v.check(c.Cache.PersistInterval == 0 || c.Cache.PersistInterval.D() >= cachefile.MinEvery, "cache.persist_interval",
		fmt.Sprintf("must be 0 (on stop only) or >= %v", cachefile.MinEvery))
	v.routes(c)
	v.hosts(c)
	v.queue(c)
	return errors.Join(v.errs...)
}

// validator collects problems so that one run reports all of them.
type validator struct {
	errs []error
}

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) check(ok bool, path, msg string) {
	if !ok {
		v.add(path, "%s", msg)
	}
}

func (v *validator) positive(path string, d Duration) { v.check(d > 0, path, "must be > 0") }

func (v *validator) nonNegative(path string, d Duration) { v.check(d >= 0, path, "must be >= 0") }

func (v *validator) positiveSize(path string, b ByteSize) { v.check(b > 0, path, "must be > 0") }

func (v *validator) atLeast(path string, n, lowest int) {
	v.check(n >= lowest, path, fmt.Sprintf("must be >= %d", lowest))
}

func (v *validator) node(n *Node) {
	if n.Name == "" {
		v.add("node.name", "is required")
	} else if !validNodeName(n.Name) {
		v.add("node.name", "%q must be letters, digits, '.', '_' or '-', starting with a letter or digit", n.Name)
	}
	v.check(n.HTTP != "", "node.http", "is required")
	v.bindAddr("node.http", n.HTTP)
	v.check(n.DataDir != "", "node.data_dir", "must not be empty")
	v.bindAddr("node.gossip", n.Gossip)
	v.bindAddr("node.raft", n.Raft)
	v.bindAddr("node.admin", n.Admin)
	v.distinctAddrs(n)
	v.advertise(n)
	v.join(n)
	v.bootstrap(n)
	v.positive("node.shutdown_timeout", n.ShutdownTimeout)
	v.nonNegative("node.drain_delay", n.DrainDelay)
	v.check(slices.Contains([]string{"debug", "info", "warn", "error"}, n.LogLevel), "node.log_level", "must be debug, info, warn or error")
	v.check(validAccessLog(n.AccessLog), "node.access_log", "must be off, all, or a fraction in (0, 1]")
	v.check(n.DrainDelay < n.ShutdownTimeout, "node.drain_delay", "must be < node.shutdown_timeout")
	v.check(n.MaxHeaderBytes > 0 && n.MaxHeaderBytes <= MaxHeaderBytes, "node.max_header_bytes",
		fmt.Sprintf("must be in [1, %v]", MaxHeaderBytes))
	v.positiveSize("node.max_request_body", n.MaxRequestBody)
	v.check(n.ReadTimeout >= MinReadTimeout, "node.read_timeout", fmt.Sprintf("must be >= %v", MinReadTimeout))
	v.positive("node.idle_timeout", n.IdleTimeout)
	v.connections(n)
	v.atLeast("node.max_inflight_fetches", n.MaxInflightFetches, 1)
}

// MaxHeaderBytes bounds node.max_header_bytes. net/http reads up to
// MaxHeaderBytes + 4096 bytes of header, a sum that past the int range
// turns negative and answers every request 431; Envoy caps its
// max_request_headers_kb at 8192 KiB, which is ours. The listener in api
// enforces node.max_header_bytes and trusts this bound.
const MaxHeaderBytes = ByteSize(8 << 20)

// MinReadTimeout bounds node.read_timeout from below: shorter, a request
// cannot even arrive (1ns answered none), and a client on a slow link or
// a peer's forward with a body would be cut off. The listener in api
// enforces node.read_timeout and trusts this bound.
const MinReadTimeout = Duration(time.Second)

// MinRejoinInterval bounds cluster.rejoin_interval from below: the
// rejoin loop (cluster.Membership, which trusts this bound) runs once per
// interval, and at 1ns it took most of a core (measured: 0.9 cores on a
// node with no peers). memberlist's own fastest loop, gossip, runs every
// 200ms on a LAN.
const MinRejoinInterval = Duration(100 * time.Millisecond)

// connections checks the app listener's connection bounds with the one
// connlimit, which enforces them, exports. A pending bound above the one
// it is a share of, or a pressure_read_timeout above read_timeout, is not
// refused: it acts as that one (connlimit clamps it), so setting
// max_connections: 64 or read_timeout: 1s alone stays valid.
func (v *validator) connections(n *Node) {
	v.atLeast("node.max_connections", n.MaxConnections, connlimit.MinLimit)
	v.atLeast("node.max_pending_connections", n.MaxPendingConnections, connlimit.MinLimit)
	v.atLeast("node.max_pending_per_ip", n.MaxPendingPerIP, connlimit.MinLimit)
	// The pressure timeout replaces read_timeout for every connection while
	// the node is under pressure: MinReadTimeout's reason holds for it too.
	v.check(n.PressureReadTimeout >= MinReadTimeout, "node.pressure_read_timeout", fmt.Sprintf("must be >= %v", MinReadTimeout))
}

// writeMargin is how much longer than reading a request and serving it
// (at most cluster.forward_timeout, which exceeds every route's budget)
// node.write_timeout must be: time to write the answer.
const writeMargin = Duration(5 * time.Second)

// writeTimeout checks that a request that takes all of node.read_timeout
// to arrive and all of cluster.forward_timeout to be served can still be
// answered.
func (v *validator) writeTimeout(n *Node, c *Cluster) {
	if least := addSat(n.ReadTimeout, c.ForwardTimeout, writeMargin); n.WriteTimeout < least {
		v.add("node.write_timeout", "%v must be at least node.read_timeout + cluster.forward_timeout + %v (%v)",
			n.WriteTimeout, writeMargin, least)
	}
}

// addSat adds durations, saturating at the largest: a sum past it wrapped
// negative, and a read_timeout of 292 years then let any write_timeout
// through.
func addSat(ds ...Duration) Duration {
	var sum Duration
	for _, d := range ds {
		if d > 0 && sum > math.MaxInt64-d {
			return math.MaxInt64
		}
		sum += d
	}
	return sum
}

// bindAddr checks an optional listen address: host:port, where an empty
// host means every interface and port 0 a free port.
func (v *validator) bindAddr(path, addr string) {
	if addr == "" {
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !validPort(port, true) || (host != "" && !validHost(host)) {
		v.add(path, "must be host:port, got %q", addr)
	}
}

// distinctAddrs rejects two listeners on one fixed address, which would
// fail at startup with a less helpful "address already in use".
func (v *validator) distinctAddrs(n *Node) {
	addrs := []struct{ path, addr string }{
		{"node.http", n.HTTP}, {"node.gossip", n.Gossip}, {"node.raft", n.Raft}, {"node.admin", n.Admin},
	}
	for i, a := range addrs {
		for _, b := range addrs[:i] {
			switch {
			case a.addr == "" || b.addr == "" || hasPortZero(a.addr):
			case a.addr == b.addr:
				v.add(a.path, "%q is also %s", a.addr, b.path)
			case sharePort(a.addr, b.addr):
				v.add(a.path, "%q takes the port of %s (%q)", a.addr, b.path, b.addr)
			}
		}
	}
}

// sharePort reports whether two listeners on a and b would take one port:
// the same port, and the same host or one of them every interface
// (":8080" and "127.0.0.1:8080" collide).
func sharePort(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb {
		return false
	}
	return ha == hb || unspecifiedHost(ha) || unspecifiedHost(hb)
}

// advertise checks the advertised host. Raft refuses to advertise an
// unspecified address, so binding raft to every interface needs one.
func (v *validator) advertise(n *Node) {
	if n.Advertise != "" {
		if !validHost(n.Advertise) {
			v.add("node.advertise", "%q must be a host name or IP address, without a port", n.Advertise)
		}
		return
	}
	if host, _, err := net.SplitHostPort(n.Raft); err == nil && unspecifiedHost(host) {
		v.add("node.advertise", "is required when node.raft (%q) binds every interface", n.Raft)
	}
}

func (v *validator) join(n *Node) {
	if len(n.Join) > 0 && n.Gossip == "" {
		v.add("node.join", "needs node.gossip")
	}
	if n.Gossip != "" && n.Raft == "" {
		// Peers reach a member's cache (forwards, replication) on its
		// internal port, which is node.raft.
		v.add("node.raft", "is required with node.gossip: it is the internal port that carries Raft and node-to-node messages")
	}
	for i, addr := range n.Join {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" || !validHost(host) || !validPort(port, false) {
			v.add(fmt.Sprintf("node.join[%d]", i), "must be host:port with a non-zero port, got %q", addr)
		}
	}
}

func (v *validator) bootstrap(n *Node) {
	switch {
	case n.BootstrapExpect < 0:
		v.add("node.bootstrap_expect", "must be >= 0")
	case n.BootstrapExpect > 0 && n.Raft == "":
		v.add("node.bootstrap_expect", "needs node.raft")
	case n.BootstrapExpect > 1 && n.Gossip == "":
		v.add("node.bootstrap_expect", "%d needs node.gossip to find the other voters", n.BootstrapExpect)
	}
}

func (v *validator) cluster(c *Cluster) {
	v.between("cluster.partitions", c.Partitions, 1, ring.MaxPartitions) // ring.New refuses more
	v.check(c.LoadFactor > 1, "cluster.load_factor", "must be > 1")
	v.atLeast("cluster.replication", c.Replication, 0)
	v.check(c.RejoinInterval >= MinRejoinInterval, "cluster.rejoin_interval", fmt.Sprintf("must be >= %v", MinRejoinInterval))
	v.positive("cluster.dead_after", c.DeadAfter)
	v.positive("cluster.stabilization_time", c.StabilizationTime)
	v.positive("cluster.forward_timeout", c.ForwardTimeout)
	v.check(c.NearCache.MaxBytes >= 0, "cluster.near_cache.max_bytes", "must be >= 0")
	v.check(c.NearCache.TTL > 0 && c.NearCache.TTL.D() <= MaxNearCacheTTL, "cluster.near_cache.ttl", fmt.Sprintf("must be in (0, %v]", MaxNearCacheTTL))
}

// validNodeName reports whether s can name a node: it becomes a raft server
// ID and a directory name, so it is kept to a portable character set.
func validNodeName(s string) bool {
	if s == "" || len(s) > 253 || !isAlnum(s[0]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// validHost reports whether s is an IP address or a host name.
func validHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	if s == "" || len(s) > 253 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// validPort reports whether s is a port number; zero only when allowed.
func validPort(s string, zeroOK bool) bool {
	p, err := strconv.ParseUint(s, 10, 16)
	return err == nil && (zeroOK || p > 0)
}

func hasPortZero(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// unspecifiedHost reports whether a bind host means "every interface".
func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func validAccessLog(s string) bool {
	switch s {
	case "off", "all", "":
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f > 0 && f <= 1
}
