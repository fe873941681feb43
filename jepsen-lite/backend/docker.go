package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/levee/levee/jepsen-lite/relay"
)

// Names and addresses of the docker backend, from docker-compose.yml.
const (
	composeProject = "levee-chaos"
	dockerNetPfx   = "172.28.0."
	dockerUpstream = "http://172.28.0.10:9000"
	overrideFile   = "docker-chaos.override.yml"
	chaosConfFile  = "docker-chaos.levee.yaml"
	upTimeout      = 5 * time.Minute // image build + start
	availTimeout   = 5 * time.Second
)

// Available reports whether a Docker engine answers `docker info` within
// a few seconds.
func Available() bool {
	ctx, cancel := context.WithTimeout(context.Background(), availTimeout)
	defer cancel()
	_, err := newRunner(nil).runLong(ctx, "", "docker", "info")
	return err == nil
}

// Docker runs the repo's compose cluster under its own project name, with
// a generated override that mounts the chaos route config into every node.
// Faults enter each container's network namespace with nsenter.
type Docker struct {
	cfg     Config
	routes  Routes
	run     runner
	nodes   []Node
	faults  *netFaults
	compose []string // "docker compose" or "docker-compose", set by Setup

	lock *runLock // held from Setup to Teardown

	mu  sync.Mutex        // guards ids: Alive may race the nemesis
	ids map[string]string // service → container id
}

// NewDocker checks cfg and returns a Docker backend; it does no I/O.
func NewDocker(cfg Config, routes Routes) (*Docker, error) {
	if err := checkConfig(cfg, false); err != nil {
		return nil, err
	}
	if cfg.Nodes != 3 && cfg.Nodes != 5 {
		// The compose file always runs n1..n3 and adds n4, n5 by profile.
		return nil, fmt.Errorf("backend: docker runs 3 or 5 nodes, not %d", cfg.Nodes)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	cfg.Dir = dir
	d := &Docker{cfg: cfg, routes: routes, run: newRunner(cfg.Log), ids: map[string]string{}}
	ips := map[string]string{}
	for i := 1; i <= cfg.Nodes; i++ {
		ip := fmt.Sprintf("%s%d", dockerNetPfx, 10+i)
		d.nodes = append(d.nodes, Node{Name: nodeName(i), URL: "http://" + ip + ":8080", IP: ip})
		ips[nodeName(i)] = ip
	}
	d.faults = newNetFaults(d.run, ips, "eth0", d.enter, func(n string) bool { return !d.Alive(n) })
	return d, nil
}

// Nodes lists the nodes in name order.
func (d *Docker) Nodes() []Node { return append([]Node(nil), d.nodes...) }

// Routes are the route windows every node runs with.
func (d *Docker) Routes() Routes { return d.routes }

// UpstreamURL is the demo upstream's container address.
func (d *Docker) UpstreamURL() string { return dockerUpstream }

// Setup writes the override and config, removes a previous run of the
// project, runs `up --build -d` and waits until the cluster converged.
func (d *Docker) Setup(ctx context.Context) error {
	if d.lock == nil {
		lock, err := acquire(ctx, "docker")
		if err != nil {
			return err
		}
		d.lock = lock
	}
	if err := d.prepare(ctx); err != nil {
		return err
	}
	d.down()
	upCtx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	if _, err := d.run.runLong(upCtx, "", d.composeArgs("up", "--build", "-d")...); err != nil {
		return err
	}
	for _, n := range d.nodes {
		if err := d.lookupID(ctx, n.Name); err != nil {
			return err
		}
		if err := d.faults.install(ctx, n.Name); err != nil {
			return err
		}
	}
	ctx, cancel = context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := waitReady(ctx, "demo upstream", dockerUpstream+"/-/stats"); err != nil {
		return err
	}
	for _, n := range d.nodes {
		if err := waitReady(ctx, n.Name+" readyz", n.URL+"/-/readyz"); err != nil {
			return err
		}
	}
	return WaitConverged(ctx, d.nodes)
}

// prepare finds compose and the compose file and writes the generated
// files under cfg.Dir.
func (d *Docker) prepare(ctx context.Context) error {
	d.compose = detectCompose(ctx, d.run)
	if d.compose == nil {
		return fmt.Errorf("%w: neither `docker compose` nor docker-compose works", ErrUnsupported)
	}
	file, err := findCompose(d.cfg.Compose)
	if err != nil {
		return err
	}
	d.cfg.Compose = file
	if err := os.MkdirAll(d.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	conf, err := dockerSharedYAML(d.cfg, d.routes)
	if err != nil {
		return err
	}
	over, err := dockerOverrideYAML(filepath.Join(d.cfg.Dir, chaosConfFile), d.cfg.Seed)
	if err != nil {
		return err
	}
	// 0644: the containers run as uid 65532 and must read the config.
	return errors.Join(os.WriteFile(filepath.Join(d.cfg.Dir, chaosConfFile), conf, 0o644),
		os.WriteFile(filepath.Join(d.cfg.Dir, overrideFile), over, 0o644))
}

// detectCompose prefers the compose v2 plugin, then docker-compose v1.
func detectCompose(ctx context.Context, r runner) []string {
	if _, err := r.run(ctx, "", "docker", "compose", "version"); err == nil {
		return []string{"docker", "compose"}
	}
	if _, err := r.run(ctx, "", "docker-compose", "version"); err == nil {
		return []string{"docker-compose"}
	}
	return nil
}

// findCompose returns path, or the first docker-compose.yml found walking
// up from the working directory when path is "".
func findCompose(path string) (string, error) {
	if path != "" {
		return filepath.Abs(path)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("backend: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "docker-compose.yml")); err == nil {
			return filepath.Join(dir, "docker-compose.yml"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("backend: no docker-compose.yml above the working directory; set Config.Compose")
		}
		dir = parent
	}
}

// composeArgs is a compose command for this project. The env prefix pins
// the secret and token to the mounted file (an outer LEVEE_CLUSTER_* would
// override it) and lets docker pick free host ports, which the harness
// does not use (it reaches containers by IP) and which must not clash with
// a `make run` or a developer's compose cluster.
func (d *Docker) composeArgs(args ...string) []string {
	argv := []string{"env", "LEVEE_CLUSTER_SECRET=", "LEVEE_CLUSTER_ADMIN_TOKEN=",
		"LEVEE_UPSTREAM_PORT=0", "LEVEE_N1_PORT=0", "LEVEE_N2_PORT=0", "LEVEE_N3_PORT=0",
		"LEVEE_N4_PORT=0", "LEVEE_N5_PORT=0"}
	argv = append(argv, d.compose...)
	argv = append(argv, "-p", composeProject, "-f", d.cfg.Compose)
	if over := filepath.Join(d.cfg.Dir, overrideFile); fileExists(over) {
		argv = append(argv, "-f", over)
	}
	if d.cfg.Nodes == 5 {
		argv = append(argv, "--profile", "five")
	}
	return append(argv, args...)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// lookupID records the container id of service.
func (d *Docker) lookupID(ctx context.Context, service string) error {
	out, err := d.run.run(ctx, "", d.composeArgs("ps", "-q", service)...)
	if err != nil {
		return err
	}
	id := strings.TrimSpace(out)
	if id == "" {
		return fmt.Errorf("backend: no container for %s", service)
	}
	d.mu.Lock()
	d.ids[service] = id
	d.mu.Unlock()
	return nil
}

func (d *Docker) id(name string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.ids[name]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownNode, name)
	}
	return id, nil
}

// enter is nsenter into the container's network namespace, found by the
// pid of its init process (it changes on every start).
func (d *Docker) enter(ctx context.Context, name string) ([]string, error) {
	id, err := d.id(name)
	if err != nil {
		return nil, err
	}
	out, err := d.run.run(ctx, "", "docker", "inspect", "-f", "{{.State.Pid}}", id)
	if err != nil {
		return nil, err
	}
	pid := strings.TrimSpace(out)
	if pid == "" || pid == "0" {
		return nil, fmt.Errorf("backend: %s is not running", name)
	}
	return []string{"nsenter", "-t", pid, "-n"}, nil
}

// docker runs `docker verb <container>`.
func (d *Docker) docker(verb, name string) error {
	id, err := d.id(name)
	if err != nil {
		return err
	}
	_, err = d.run.run(context.Background(), "", "docker", verb, id)
	return err
}

// Kill is docker kill (SIGKILL); the override sets restart: "no", so it
// stays down until Restart.
func (d *Docker) Kill(name string) error { return d.docker("kill", name) }

// Stop is docker stop: SIGTERM, and SIGKILL after StopTimeout. Docker
// does not say which ended it, so the exit code does: 137 is SIGKILL.
func (d *Docker) Stop(ctx context.Context, name string) error {
	id, err := d.id(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, StopTimeout+cmdTimeout)
	defer cancel()
	secs := fmt.Sprint(int(StopTimeout.Seconds()))
	if _, err := d.run.runLong(ctx, "", "docker", "stop", "-t", secs, id); err != nil {
		return err
	}
	out, err := d.run.run(ctx, "", "docker", "inspect", "-f", "{{.State.ExitCode}}", id)
	if err == nil && strings.TrimSpace(out) == "137" {
		return fmt.Errorf("%w: %s still running %v after SIGTERM: killed", ErrStopTimeout, name, StopTimeout)
	}
	return err
}

// Restart is docker start: same container, same volume. The container has
// a new network namespace, so its chains and current rules are installed
// again before waiting for /-/readyz.
func (d *Docker) Restart(ctx context.Context, name string) error {
	if err := d.docker("start", name); err != nil {
		return err
	}
	if err := d.faults.install(ctx, name); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return waitReady(ctx, name+" readyz", d.nodes[nodeIndex(d.nodes, name)].URL+"/-/readyz")
}

func nodeIndex(nodes []Node, name string) int {
	for i, n := range nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// Pause is docker pause (cgroup freezer).
func (d *Docker) Pause(name string) error { return d.docker("pause", name) }

// Resume is docker unpause.
func (d *Docker) Resume(name string) error { return d.docker("unpause", name) }

// Alive reports whether the container is running (a paused one is).
func (d *Docker) Alive(name string) bool {
	id, err := d.id(name)
	if err != nil {
		return false
	}
	out, err := d.run.run(context.Background(), "", "docker", "inspect", "-f", "{{.State.Running}}", id)
	return err == nil && strings.TrimSpace(out) == "true"
}

// Partition cuts links between groups by iptables rules inside each
// listed container's namespace; it replaces any earlier partition.
func (d *Docker) Partition(groups [][]string) error {
	return d.faults.partition(context.Background(), groups)
}

// Heal removes every partition, loss and delay rule.
func (d *Docker) Heal() error { return d.faults.heal(context.Background()) }

// Loss drops pct percent of the container's packets, both directions.
func (d *Docker) Loss(name string, pct int) error {
	return d.faults.loss(context.Background(), name, pct)
}

// Delay shapes the container's interface with tc netem (it keeps netem:
// the relays of the local backend would need the node's config to point
// its internal port behind them, and the compose file's is the one users
// run); ErrUnsupported without netem, so the window is recorded skipped.
func (d *Docker) Delay(name string, s relay.Shape) error {
	return d.faults.delay(context.Background(), name, s)
}

// down removes the project's containers, network and volumes (paused
// containers are resumed first so they stop at once).
func (d *Docker) down() {
	d.mu.Lock()
	ids := make([]string, 0, len(d.ids))
	for _, id := range d.ids {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	for _, id := range ids {
		d.run.quiet("docker", "unpause", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	argv := d.composeArgs("--profile", "five", "down", "-v", "--remove-orphans", "-t", "1")
	_, _ = d.run.runLong(ctx, "", argv...)
}

// Teardown runs `down -v` and removes the generated files. Safe to call
// twice and after a failed Setup.
func (d *Docker) Teardown() error {
	if d.lock == nil {
		return nil // never set up, or already torn down
	}
	defer func() { d.lock.release(); d.lock = nil }()
	if d.compose == nil || d.cfg.Compose == "" {
		return nil // Setup never got far enough to start anything
	}
	d.down()
	out, err := d.run.run(context.Background(), "", "docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+composeProject)
	d.mu.Lock()
	d.ids = map[string]string{}
	d.mu.Unlock()
	rmErr := errors.Join(removeIfExists(filepath.Join(d.cfg.Dir, overrideFile)),
		removeIfExists(filepath.Join(d.cfg.Dir, chaosConfFile)))
	if err == nil && strings.TrimSpace(out) != "" {
		return fmt.Errorf("backend: containers left after down: %s", strings.TrimSpace(out))
	}
	return errors.Join(err, rmErr)
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backend: %w", err)
	}
	return nil
}
