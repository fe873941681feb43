package nemesis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/levee/levee/jepsen-lite/backend"
	"github.com/levee/levee/jepsen-lite/history"
)

func (r *Runner) names() []string {
	var out []string
	for _, n := range r.b.Nodes() {
		out = append(out, n.Name)
	}
	return out
}

// shuffled returns the node names in a seeded random order.
func (r *Runner) shuffled() []string {
	ns := r.names()
	r.rng.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
	return ns
}

// leader asks the nodes, in random order, who the Raft leader is.
func (r *Runner) leader(ctx context.Context) (string, error) {
	var v struct {
		Raft *struct {
			Leader string `json:"leader"`
		} `json:"raft"`
	}
	for _, name := range r.shuffled() {
		n := r.node(name)
		if r.getJSON(ctx, n.URL+"/-/cluster", &v) == nil && v.Raft != nil && v.Raft.Leader != "" {
			return v.Raft.Leader, nil
		}
	}
	return "", fmt.Errorf("no node names a raft leader")
}

// owner asks the nodes, in random order, who owns the hot key.
func (r *Runner) owner(ctx context.Context) (string, error) {
	var v struct {
		Owner string `json:"owner"`
	}
	for _, name := range r.shuffled() {
		if r.getJSON(ctx, r.ownerQuery(r.node(name)), &v) == nil && v.Owner != "" {
			return v.Owner, nil
		}
	}
	return "", fmt.Errorf("no node names the owner of %s", r.cfg.HotPath)
}

func (r *Runner) node(name string) backend.Node {
	for _, n := range r.b.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return backend.Node{Name: name}
}

// target resolves the single node a kind aims at. When the leader or
// owner cannot be found, a random node is used and the note says so.
func (r *Runner) target(ctx context.Context, f *history.Fault) string {
	var (
		name string
		err  error
	)
	switch f.Kind {
	case IsolateLeader, KillLeader:
		name, err = r.leader(ctx)
	case IsolateOwner, KillOwner:
		name, err = r.owner(ctx)
	default:
		return r.shuffled()[0]
	}
	if err != nil || !slices.Contains(r.names(), name) {
		f.Note = join(f.Note, fmt.Sprintf("target lookup failed (%v, %q): random node", err, name))
		return r.shuffled()[0]
	}
	return name
}

// groups builds the partition for f; targets are the nodes off the side
// that can hold a Raft quorum (all nodes for ring and bridge, whose
// connectivity is partial everywhere).
func (r *Runner) groups(ctx context.Context, f *history.Fault) (groups [][]string, targets []string) {
	ns := r.shuffled()
	switch f.Kind {
	case Halves:
		k := len(ns) / 2
		return [][]string{ns[:k], ns[k:]}, ns[:k]
	case Bridge:
		// ns[2] is in no group, so it keeps every link: the bridge.
		return [][]string{ns[:2], ns[3:]}, ns
	case MajoritiesRing:
		// Each node should see only its two ring neighbours; groups are
		// the ring's edges, so a node is in two groups.
		var gs [][]string
		for i := range ns {
			gs = append(gs, []string{ns[i], ns[(i+1)%len(ns)]})
		}
		return gs, ns
	}
	t := r.target(ctx, f)
	rest := slices.DeleteFunc(slices.Clone(r.names()), func(n string) bool { return n == t })
	return [][]string{{t}, rest}, []string{t}
}

func (r *Runner) partition(ctx context.Context, f *history.Fault) (func(context.Context) error, error) {
	f.Groups, f.Targets = r.groups(ctx, f)
	if err := r.b.Partition(f.Groups); err != nil {
		return func(context.Context) error { return r.b.Heal() }, err
	}
	return func(context.Context) error { return r.b.Heal() }, nil
}

// kill kills the target(s) and restarts them with the same data dir at the
// window's end.
func (r *Runner) kill(ctx context.Context, f *history.Fault) (func(context.Context) error, error) {
	if f.Kind == KillMinority {
		ns := r.shuffled()
		f.Targets = ns[:(len(ns)-1)/2]
	} else {
		f.Targets = []string{r.target(ctx, f)}
	}
	var killed []string
	for _, n := range f.Targets {
		if err := r.b.Kill(n); err != nil {
			return r.restarter(killed), err
		}
		r.killed[n] = true
		killed = append(killed, n)
	}
	return r.restarter(killed), nil
}

func (r *Runner) restarter(names []string) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, n := range names {
			if err := r.b.Restart(ctx, n); err != nil {
				return fmt.Errorf("restart %s: %w", n, err)
			}
			delete(r.killed, n)
		}
		return nil
	}
}

func (r *Runner) pause(f *history.Fault) (func(context.Context) error, error) {
	n := r.shuffled()[0]
	f.Targets = []string{n}
	if err := r.b.Pause(n); err != nil {
		return nil, err
	}
	r.paused[n] = true
	return func(context.Context) error {
		delete(r.paused, n)
		return r.b.Resume(n)
	}, nil
}

// degrade applies loss or delay to one node; Heal removes both.
func (r *Runner) degrade(f *history.Fault) (func(context.Context) error, error) {
	n := r.shuffled()[0]
	f.Targets = []string{n}
	heal := func(context.Context) error { return r.b.Heal() }
	if f.Kind == Loss {
		f.Note = fmt.Sprintf("%d%% loss", r.cfg.LossPct)
		return heal, r.b.Loss(n, r.cfg.LossPct)
	}
	f.Note = fmt.Sprintf("%v delay", r.cfg.Delay)
	return heal, r.b.Delay(n, r.cfg.Delay)
}

// watchTrip polls every node's breaker during an upstream outage until all
// show it not closed, and says when; it returns by the window's end.
func (r *Runner) watchTrip(ctx context.Context, end time.Duration) string {
	start := r.now()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		if r.allTripped(ctx) {
			return fmt.Sprintf("breaker open on every node %s after the outage began", time.Duration(r.now()-start).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return "run stopped before the breaker tripped everywhere"
		case <-t.C:
		}
		if time.Duration(r.now()) >= end {
			return "breaker did not trip on every reachable node during the outage"
		}
	}
}

func (r *Runner) allTripped(ctx context.Context) bool {
	for _, n := range r.b.Nodes() {
		if r.killed[n.Name] || r.paused[n.Name] {
			continue
		}
		var views []struct {
			Route string `json:"route"`
			State string `json:"state"`
		}
		if r.getJSON(ctx, n.URL+"/-/breakers", &views) != nil {
			return false
		}
		for _, v := range views {
			if v.Route == "comments" && v.State == "closed" {
				return false
			}
		}
	}
	return true
}
