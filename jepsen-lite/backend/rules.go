package backend

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Chains the backend owns in each node's network namespace. INPUT and
// OUTPUT jump to them for non-loopback traffic only, because a node talks
// to itself over lo (even to its own IP) and must never be cut off from
// itself. Heal flushes these chains and nothing else.
const (
	chainIn  = "LEVEE-CHAOS-IN"
	chainOut = "LEVEE-CHAOS-OUT"
)

// ruleSet is the chaos state of one node: the peer IPs it cannot reach
// and the packet loss it suffers. It is kept by the backend so rules can be
// re-applied to a fresh namespace (a restarted container gets a new one).
type ruleSet struct {
	blocked map[string]bool // peer IPs dropped both ways
	lossPct int             // 0..100
}

func (r ruleSet) empty() bool { return len(r.blocked) == 0 && r.lossPct == 0 }

// restoreScript is the iptables-restore --noflush input that makes the two
// chains hold exactly r. Declaring a user chain in --noflush mode creates
// it or flushes it, so one call replaces the previous rules atomically and
// leaves every other chain alone.
func (r ruleSet) restoreScript() string {
	var b strings.Builder
	b.WriteString("*filter\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n:%s - [0:0]\n", chainIn, chainOut)
	for _, ip := range slices.Sorted(maps.Keys(r.blocked)) {
		fmt.Fprintf(&b, "-A %s -s %s -j DROP\n", chainIn, ip)
		fmt.Fprintf(&b, "-A %s -d %s -j DROP\n", chainOut, ip)
	}
	if r.lossPct > 0 {
		p := lossProbability(r.lossPct)
		fmt.Fprintf(&b, "-A %s -m statistic --mode random --probability %s -j DROP\n", chainIn, p)
		fmt.Fprintf(&b, "-A %s -m statistic --mode random --probability %s -j DROP\n", chainOut, p)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// lossProbability formats pct (clamped to 0..100) as iptables' statistic
// probability.
func lossProbability(pct int) string {
	pct = max(0, min(100, pct))
	return fmt.Sprintf("%.2f", float64(pct)/100)
}

// jumpRule is the rule that sends one direction's non-loopback traffic to
// our chain, without the -C/-I/-D verb.
func jumpRule(builtin string) []string {
	if builtin == "INPUT" {
		return []string{"INPUT", "!", "-i", "lo", "-j", chainIn}
	}
	return []string{"OUTPUT", "!", "-o", "lo", "-j", chainOut}
}

// partitionBlocks returns, for every node named in groups, the IPs of the
// nodes in the other groups. ips maps node name to IP. Nodes not listed get
// no entry: they keep every link.
func partitionBlocks(groups [][]string, ips map[string]string) (map[string]map[string]bool, error) {
	// Two listed nodes may talk iff some group holds both; a node may sit in
	// several groups (majorities-ring: each node shares a group with each
	// ring neighbour only). Unlisted nodes keep every link.
	groupsOf := map[string][]int{}
	for g, names := range groups {
		for _, n := range names {
			if _, ok := ips[n]; !ok {
				return nil, fmt.Errorf("%w: %q", ErrUnknownNode, n)
			}
			if !slices.Contains(groupsOf[n], g) {
				groupsOf[n] = append(groupsOf[n], g)
			}
		}
	}
	share := func(a, b []int) bool {
		for _, g := range a {
			if slices.Contains(b, g) {
				return true
			}
		}
		return false
	}
	blocks := map[string]map[string]bool{}
	for n, gs := range groupsOf {
		blocks[n] = map[string]bool{}
		for m, hs := range groupsOf {
			if m != n && !share(gs, hs) {
				blocks[n][ips[m]] = true
			}
		}
	}
	return blocks, nil
}
