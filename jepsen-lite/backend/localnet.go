package backend

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// Fixed names and addresses of the local backend. They are fixed, not per
// run, so Setup can find and remove what a crashed run left behind.
const (
	namePrefix = "lvch"
	bridgeName = namePrefix + "-br"
	bridgeIP   = "10.88.0.1"
	netPrefix  = "10.88.0."
	maxNodes   = 5      // the compose file has n1..n5; IPs .11-.15
	nsDev      = "eth0" // the veth end inside each namespace
)

func nodeName(i int) string { return fmt.Sprintf("n%d", i) }
func nodeIP(i int) string   { return fmt.Sprintf("%s%d", netPrefix, 10+i) }

// nsName is node i's network namespace; the host end of its veth has the
// same name (ip keeps the two name spaces apart).
func nsName(i int) string { return fmt.Sprintf("%s-%s", namePrefix, nodeName(i)) }

// forwardRule lets traffic between ports of our bridge pass the root
// namespace's FORWARD chain: with br_netfilter loaded bridged packets go
// through it, and Docker sets its policy to DROP.
func forwardRule() []string {
	return []string{"FORWARD", "-i", bridgeName, "-o", bridgeName, "-j", "ACCEPT"}
}

// localNet creates and removes the bridge, namespaces and veths.
type localNet struct {
	run runner
}

// cleanup removes everything a previous run may have left: processes in
// our namespaces, the namespaces, veths, bridge and FORWARD rules. Every
// step may find nothing, so failures are ignored.
func (n localNet) cleanup() {
	for i := 1; i <= maxNodes; i++ {
		n.killNamespace(nsName(i))
		n.run.quiet("ip", "netns", "del", nsName(i))
		n.run.quiet("ip", "link", "del", nsName(i))
	}
	n.run.quiet("ip", "link", "del", bridgeName)
	for range 10 { // one per leftover copy of the rule
		if n.run.must(append([]string{"iptables", "-w", "-D"}, forwardRule()...)...) != nil {
			break
		}
	}
}

// killNamespace SIGKILLs every process still in namespace ns.
func (n localNet) killNamespace(ns string) {
	out, err := n.run.run(context.Background(), "", "ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, pid := range parsePids(out) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// parsePids reads `ip netns pids` output: one pid a line. Anything that is
// not a pid above 1 is skipped, so a garbled line can never aim a kill at
// init or at every process (-1).
func parsePids(out string) []int {
	var pids []int
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// create builds the bridge and one namespace per node, wired by veths.
func (n localNet) create(ctx context.Context, nodes int) error {
	steps := [][]string{
		{"ip", "link", "add", bridgeName, "type", "bridge"},
		{"ip", "addr", "add", bridgeIP + "/24", "dev", bridgeName},
		{"ip", "link", "set", bridgeName, "up"},
		append([]string{"iptables", "-w", "-I"}, forwardRule()...),
	}
	for i := 1; i <= nodes; i++ {
		steps = append(steps, nodeNetSteps(i)...)
	}
	for _, s := range steps {
		if _, err := n.run.run(ctx, "", s...); err != nil {
			return err
		}
	}
	return nil
}

// nodeNetSteps are the ip commands giving node i its namespace, veth and
// address.
func nodeNetSteps(i int) [][]string {
	ns := nsName(i)
	return [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", ns, "type", "veth", "peer", "name", nsDev, "netns", ns},
		{"ip", "link", "set", ns, "master", bridgeName},
		{"ip", "link", "set", ns, "up"},
		{"ip", "-n", ns, "addr", "add", nodeIP(i) + "/24", "dev", nsDev},
		{"ip", "-n", ns, "link", "set", nsDev, "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
	}
}
