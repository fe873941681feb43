package backend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/levee/levee/jepsen-lite/relay"
)

// readyTimeout bounds the wait for one node's /-/readyz after it starts.
const readyTimeout = 60 * time.Second

// Local runs the demo upstream in the root namespace on the bridge IP and
// every node as a process in its own network namespace, so iptables rules
// inside a namespace cut exactly that node's links.
type Local struct {
	cfg    Config
	routes Routes
	run    runner
	net    localNet
	nodes  []Node
	faults *netFaults
	links  *links // the delay fault's relays and shapes

	lock *runLock // held from Setup to Teardown

	mu       sync.Mutex // guards procs and upstream: Alive may race the nemesis
	procs    map[string]*proc
	upstream *proc
}

// NewLocal checks cfg and returns a Local backend; it does no I/O.
func NewLocal(cfg Config, routes Routes) (*Local, error) {
	if err := checkConfig(cfg, true); err != nil {
		return nil, err
	}
	if err := checkNodeYAML(cfg, routes); err != nil {
		return nil, err
	}
	bin, err1 := filepath.Abs(cfg.Bin)
	demo, err2 := filepath.Abs(cfg.Demo)
	dir, err3 := filepath.Abs(cfg.Dir)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	cfg.Bin, cfg.Demo, cfg.Dir = bin, demo, dir
	l := &Local{cfg: cfg, routes: routes, run: newRunner(cfg.Log), procs: map[string]*proc{}}
	l.net = localNet{run: l.run}
	ips := map[string]string{}
	for i := 1; i <= cfg.Nodes; i++ {
		l.nodes = append(l.nodes, Node{Name: nodeName(i), URL: "http://" + nodeIP(i) + ":8080", IP: nodeIP(i)})
		ips[nodeName(i)] = nodeIP(i)
	}
	// A namespace outlives its node's process, so no node is ever absent.
	l.faults = newNetFaults(l.run, ips, nsDev, l.enter, func(string) bool { return false })
	l.links = newLinks(ips)
	return l, nil
}

// minCredentialLen is levee's shortest cluster.secret and admin_token.
const minCredentialLen = 16

// checkConfig validates the fields a backend needs; binaries only for the
// local backend.
func checkConfig(cfg Config, local bool) error {
	var errs []error
	if cfg.Nodes < 1 || cfg.Nodes > maxNodes {
		errs = append(errs, fmt.Errorf("backend: Nodes %d outside 1..%d", cfg.Nodes, maxNodes))
	}
	if cfg.Dir == "" {
		errs = append(errs, errors.New("backend: Dir is required"))
	}
	// levee refuses a clustered node without cluster.secret, or with one
	// (or an admin token) shorter than 16 characters.
	if len(cfg.Secret) < minCredentialLen {
		errs = append(errs, fmt.Errorf("backend: Secret is required, at least %d characters", minCredentialLen))
	}
	if cfg.Admin != "" && len(cfg.Admin) < minCredentialLen {
		errs = append(errs, fmt.Errorf("backend: Admin must be at least %d characters", minCredentialLen))
	}
	if local {
		for _, b := range []struct{ field, path string }{{"Bin", cfg.Bin}, {"Demo", cfg.Demo}} {
			if st, err := os.Stat(b.path); err != nil || st.IsDir() {
				errs = append(errs, fmt.Errorf("backend: %s %q is not a file (run make build)", b.field, b.path))
			}
		}
	}
	return errors.Join(errs...)
}

func (l *Local) enter(_ context.Context, node string) ([]string, error) {
	for i, n := range l.nodes {
		if n.Name == node {
			return []string{"ip", "netns", "exec", nsName(i + 1)}, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownNode, node)
}

// Nodes lists the nodes in name order.
func (l *Local) Nodes() []Node { return append([]Node(nil), l.nodes...) }

// Routes are the route windows every node runs with.
func (l *Local) Routes() Routes { return l.routes }

// UpstreamURL is the demo upstream on the bridge IP.
func (l *Local) UpstreamURL() string { return "http://" + bridgeIP + ":9000" }

// Setup removes leftovers of a crashed run, builds the network, starts the
// upstream and the nodes, and waits until the cluster has converged.
func (l *Local) Setup(ctx context.Context) error {
	if l.lock == nil {
		lock, err := acquire(ctx, "local")
		if err != nil {
			return err
		}
		l.lock = lock
	}
	l.net.cleanup()
	if err := os.MkdirAll(l.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	if err := l.net.create(ctx, l.cfg.Nodes); err != nil {
		return err
	}
	for i, n := range l.nodes {
		if err := l.faults.install(ctx, n.Name); err != nil {
			return err
		}
		if err := l.links.start(n.Name, nsName(i+1), n.IP); err != nil {
			return err
		}
	}
	if err := l.startUpstream(ctx); err != nil {
		return err
	}
	for i := 1; i <= l.cfg.Nodes; i++ {
		if err := l.startNode(i); err != nil {
			return err
		}
	}
	for _, n := range l.nodes {
		if err := l.waitNode(ctx, n); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return WaitConverged(ctx, l.nodes)
}

func (l *Local) startUpstream(ctx context.Context) error {
	argv := []string{l.cfg.Demo, "-listen", bridgeIP + ":9000", "-log-size", "200000",
		"-seed", strconv.FormatInt(l.cfg.Seed, 10)}
	p, err := startProc(argv, filepath.Join(l.cfg.Dir, "demo-upstream.log"))
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.upstream = p
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return waitReady(ctx, "demo upstream", l.UpstreamURL()+"/-/stats")
}

// startNode writes node i's config (the same file on a restart, so the
// data dir is the same) and starts it inside its namespace.
func (l *Local) startNode(i int) error {
	name := nodeName(i)
	conf := filepath.Join(l.cfg.Dir, name+".yaml")
	data, err := localNodeYAML(l.cfg, l.routes, i, filepath.Join(l.cfg.Dir, name))
	if err != nil {
		return fmt.Errorf("backend: %s config: %w", name, err)
	}
	if err := os.WriteFile(conf, data, 0o644); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	argv := []string{"ip", "netns", "exec", nsName(i), l.cfg.Bin, "-config", conf}
	p, err := startProc(argv, filepath.Join(l.cfg.Dir, name+".log"))
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.procs[name] = p
	l.mu.Unlock()
	return nil
}

func (l *Local) waitNode(ctx context.Context, n Node) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return waitReady(ctx, n.Name+" readyz", n.URL+"/-/readyz")
}

func (l *Local) proc(name string) (*proc, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.procs[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownNode, name)
	}
	return p, nil
}

// Kill SIGKILLs the node's process and reaps it.
func (l *Local) Kill(name string) error {
	p, err := l.proc(name)
	if err != nil {
		return err
	}
	p.kill()
	return nil
}

// Stop sends SIGTERM and waits until the process has exited; after
// StopTimeout (or when ctx ends first) it is killed.
func (l *Local) Stop(ctx context.Context, name string) error {
	p, err := l.proc(name)
	if err != nil {
		return err
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("backend: stop %s: %w", name, err)
	}
	t := time.NewTimer(StopTimeout)
	defer t.Stop()
	waited := StopTimeout.String()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
		waited = "until the caller gave up"
	}
	p.kill()
	return fmt.Errorf("%w: %s still running %s after SIGTERM: killed", ErrStopTimeout, name, waited)
}

// Restart starts a killed or stopped node with the same config and data
// dir and waits for its /-/readyz. Its namespace and rules were kept.
func (l *Local) Restart(ctx context.Context, name string) error {
	p, err := l.proc(name)
	if err != nil {
		return err
	}
	if p.alive() {
		return fmt.Errorf("backend: restart %s: still running", name)
	}
	i := l.index(name)
	if err := l.startNode(i); err != nil {
		return err
	}
	return l.waitNode(ctx, l.nodes[i-1])
}

func (l *Local) index(name string) int {
	for i, n := range l.nodes {
		if n.Name == name {
			return i + 1
		}
	}
	return 0
}

// Pause freezes the node's process with SIGSTOP.
func (l *Local) Pause(name string) error { return l.signal(name, syscall.SIGSTOP) }

// Resume continues a paused node with SIGCONT.
func (l *Local) Resume(name string) error { return l.signal(name, syscall.SIGCONT) }

func (l *Local) signal(name string, sig syscall.Signal) error {
	p, err := l.proc(name)
	if err != nil {
		return err
	}
	if err := p.signal(sig); err != nil {
		return fmt.Errorf("backend: %s %s: %w", sig, name, err)
	}
	return p.waitStopped(sig == syscall.SIGSTOP)
}

// PID is the process id of the node's running levee (`ip netns exec`
// execs it in place, so the id is the node's own); false when it is not
// running. The soak's resource sampler reads /proc with it.
func (l *Local) PID(name string) (int, bool) {
	p, err := l.proc(name)
	if err != nil || !p.alive() {
		return 0, false
	}
	return p.cmd.Process.Pid, true
}

// Alive reports whether the node's process is running (a paused one is).
func (l *Local) Alive(name string) bool {
	p, err := l.proc(name)
	return err == nil && p.alive()
}

// Partition cuts the links between groups by iptables rules in each
// listed node's namespace; it replaces any earlier partition.
func (l *Local) Partition(groups [][]string) error {
	return l.faults.partition(context.Background(), groups)
}

// Heal removes every partition, loss and delay rule, and every link
// shape.
func (l *Local) Heal() error {
	l.links.reset()
	return l.faults.heal(context.Background())
}

// Loss drops pct percent of the node's packets, both directions.
func (l *Local) Loss(name string, pct int) error {
	return l.faults.loss(context.Background(), name, pct)
}

// Delay gives node name's links shape s, in the relays in front of its
// internal port and its upstream (see links): no kernel module needed.
func (l *Local) Delay(name string, s relay.Shape) error {
	if l.index(name) == 0 {
		return fmt.Errorf("%w: %q", ErrUnknownNode, name)
	}
	return l.links.set(name, s)
}

// Teardown kills every process and removes the namespaces, veths, bridge
// and FORWARD rule, then releases the run lock. Safe to call twice and
// after a failed Setup.
func (l *Local) Teardown() error {
	l.mu.Lock()
	procs := append([]*proc{l.upstream}, slices.Collect(maps.Values(l.procs))...)
	l.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			p.kill()
		}
	}
	if l.lock == nil {
		return nil // never set up, or torn down: the names may be another run's now
	}
	defer func() { l.lock.release(); l.lock = nil }()
	linksErr := l.links.close()
	l.net.cleanup()
	if out, err := l.run.run(context.Background(), "", "ip", "netns", "list"); err == nil && containsNS(out) {
		return errors.Join(linksErr, fmt.Errorf("backend: teardown left namespaces: %s", out))
	}
	return linksErr
}

// containsNS reports whether `ip netns list` output names one of ours
// (each line is "name" or "name (id: N)").
func containsNS(list string) bool {
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], namePrefix+"-") {
			return true
		}
	}
	return false
}
