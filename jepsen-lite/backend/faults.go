package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/levee/levee/jepsen-lite/relay"
)

// ErrUnknownNode is returned for a node name the cluster does not have.
var ErrUnknownNode = errors.New("backend: unknown node")

// netFaults injects network faults inside node namespaces. Local and
// Docker differ only in how a command enters a node's namespace (ip netns
// exec vs nsenter), which enter supplies. It keeps each node's desired
// rules so they survive into a fresh namespace (a restarted container).
type netFaults struct {
	run    runner
	enter  func(ctx context.Context, node string) ([]string, error)
	ips    map[string]string // node name → cluster IP
	dev    string            // the node's interface inside its namespace
	rules  map[string]ruleSet
	delays map[string]relay.Shape
	// absent reports a node with no namespace right now (a stopped
	// container): its rules are recorded and applied when it restarts.
	absent func(node string) bool
}

func newNetFaults(run runner, ips map[string]string, dev string,
	enter func(context.Context, string) ([]string, error), absent func(string) bool) *netFaults {
	return &netFaults{run: run, enter: enter, ips: ips, dev: dev, absent: absent,
		rules: map[string]ruleSet{}, delays: map[string]relay.Shape{}}
}

// inNode runs argv inside node's network namespace.
func (f *netFaults) inNode(ctx context.Context, node, stdin string, argv ...string) (string, error) {
	prefix, err := f.enter(ctx, node)
	if err != nil {
		return "", err
	}
	return f.run.run(ctx, stdin, append(prefix, argv...)...)
}

// install creates the chains and the jumps into them (once per namespace;
// the -C check makes it safe to repeat) and applies node's current rules.
func (f *netFaults) install(ctx context.Context, node string) error {
	if err := f.apply(ctx, node); err != nil {
		return err
	}
	for _, builtin := range []string{"INPUT", "OUTPUT"} {
		rule := jumpRule(builtin)
		if _, err := f.inNode(ctx, node, "", append([]string{"iptables", "-w", "-C"}, rule...)...); err == nil {
			continue
		}
		ins := append([]string{"iptables", "-w", "-I", rule[0], "1"}, rule[1:]...)
		if _, err := f.inNode(ctx, node, "", ins...); err != nil {
			return err
		}
	}
	if d, ok := f.delays[node]; ok {
		return f.netem(ctx, node, d)
	}
	return nil
}

// apply replaces the content of node's chains with its current ruleSet.
func (f *netFaults) apply(ctx context.Context, node string) error {
	if f.absent(node) {
		return nil
	}
	_, err := f.inNode(ctx, node, f.rules[node].restoreScript(), "iptables-restore", "-w", "--noflush")
	return err
}

func (f *netFaults) known(node string) error {
	if _, ok := f.ips[node]; !ok {
		return fmt.Errorf("%w: %q", ErrUnknownNode, node)
	}
	return nil
}

// partition replaces every node's blocked peers with the cut described by
// groups; loss rules stay.
func (f *netFaults) partition(ctx context.Context, groups [][]string) error {
	blocks, err := partitionBlocks(groups, f.ips)
	if err != nil {
		return err
	}
	var errs []error
	for node := range f.ips {
		r := f.rules[node]
		if len(r.blocked) == 0 && len(blocks[node]) == 0 {
			continue // nothing to change: skip the exec
		}
		r.blocked = blocks[node]
		f.rules[node] = r
		errs = append(errs, f.apply(ctx, node))
	}
	return errors.Join(errs...)
}

// heal empties every node's chains and removes delays; it tries every node
// even when one fails (a killed container has no namespace to heal, and
// gets clean rules when it restarts because its state is cleared here).
func (f *netFaults) heal(ctx context.Context) error {
	var errs []error
	for node := range f.ips {
		hadRules, hadDelay := !f.rules[node].empty(), !f.delays[node].IsZero()
		delete(f.rules, node)
		delete(f.delays, node)
		if f.absent(node) {
			continue
		}
		if hadRules {
			errs = append(errs, f.apply(ctx, node))
		}
		if hadDelay {
			_, err := f.inNode(ctx, node, "", "tc", "qdisc", "del", "dev", f.dev, "root")
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// loss sets node's random packet loss to pct percent, both directions.
func (f *netFaults) loss(ctx context.Context, node string, pct int) error {
	if err := f.known(node); err != nil {
		return err
	}
	if pct < 0 || pct > 100 {
		return fmt.Errorf("backend: loss %d%% outside 0..100", pct)
	}
	r := f.rules[node]
	r.lossPct = pct
	f.rules[node] = r
	return f.apply(ctx, node)
}

// delay gives node's interface shape s with tc netem (delay, jitter,
// rate); the zero shape removes it. A failing tc is ErrUnsupported: the
// usual cause is a kernel without sch_netem, and the harness must record
// the nemesis as skipped. netem shapes what the node sends only, so a
// round trip pays the latency once, not twice as through the local
// backend's relays.
func (f *netFaults) delay(ctx context.Context, node string, s relay.Shape) error {
	if err := f.known(node); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if f.absent(node) {
		return fmt.Errorf("backend: delay %s: node not running", node)
	}
	if s.IsZero() {
		if _, ok := f.delays[node]; !ok {
			return nil
		}
		delete(f.delays, node)
		_, err := f.inNode(ctx, node, "", "tc", "qdisc", "del", "dev", f.dev, "root")
		return err
	}
	if err := f.netem(ctx, node, s); err != nil {
		return err
	}
	f.delays[node] = s
	return nil
}

func (f *netFaults) netem(ctx context.Context, node string, s relay.Shape) error {
	_, err := f.inNode(ctx, node, "", netemArgs(f.dev, s)...)
	if err != nil && errors.Is(err, ErrCommand) {
		return fmt.Errorf("%w: tc netem delay on %s: %v", ErrUnsupported, node, err)
	}
	return err
}

// netemArgs is the tc command giving dev shape s (tc-netem(8): "delay TIME
// JITTER", "rate RATE" where bps is bytes per second).
func netemArgs(dev string, s relay.Shape) []string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%dms", max(1, d.Milliseconds())) }
	args := []string{"tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", ms(s.Latency)}
	if s.Jitter > 0 {
		args = append(args, ms(s.Jitter))
	}
	if s.Bandwidth > 0 {
		args = append(args, "rate", fmt.Sprintf("%dbps", s.Bandwidth))
	}
	return args
}
