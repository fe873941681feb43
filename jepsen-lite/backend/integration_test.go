package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/jepsen-lite/relay"
)

// Budgets of the integration tests: a fault must show within faultWait
// (memberlist suspicion is a few seconds), the whole test within its total.
const faultWait = 15 * time.Second

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// repoBins returns the built binaries or skips: the tests never build.
func repoBins(t *testing.T) (levee, demo string) {
	t.Helper()
	levee, _ = filepath.Abs("../../bin/levee")
	demo, _ = filepath.Abs("../../bin/demo-upstream")
	for _, b := range []string{levee, demo} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s missing: run `make build` first", b)
		}
	}
	return levee, demo
}

// waitFor polls check until it returns nil or d passes.
func waitFor(t *testing.T, ctx context.Context, d time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := poll(ctx, what, check); err != nil {
		t.Fatal(err)
	}
}

func node(b Backend, name string) Node {
	for _, n := range b.Nodes() {
		if n.Name == name {
			return n
		}
	}
	panic("no node " + name)
}

// sees checks that from's /-/cluster shows member alive (or not).
func sees(b Backend, from, member string, alive bool) func(context.Context) error {
	return func(ctx context.Context) error {
		st, err := FetchCluster(ctx, node(b, from))
		if err != nil {
			return err
		}
		if got := slices.Contains(st.Alive(), member); got != alive {
			return fmt.Errorf("%s: %s alive=%v (alive: %v)", from, member, got, st.Alive())
		}
		return nil
	}
}

// exercise runs the fault sequence both backends must pass on 3 nodes.
func exercise(t *testing.T, ctx context.Context, b Backend) {
	t.Helper()
	converged := func(ctx context.Context) error { return Converged(ctx, b.Nodes()) }
	waitFor(t, ctx, faultWait, "3 alive members and a leader everywhere", converged)

	if err := b.Partition([][]string{{"n1"}, {"n2", "n3"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, faultWait, "n2 sees n1 dead", sees(b, "n2", "n1", false))
	if err := b.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, faultWait, "n2 sees n1 back", sees(b, "n2", "n1", true))
	waitFor(t, ctx, faultWait, "converged after heal", converged)

	if err := b.Kill("n3"); err != nil {
		t.Fatal(err)
	}
	if b.Alive("n3") {
		t.Fatal("n3 alive after Kill")
	}
	if err := b.Restart(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	if !b.Alive("n3") {
		t.Fatal("n3 not alive after Restart")
	}
	waitFor(t, ctx, faultWait, "n3 rejoined", converged)

	if err := b.Stop(ctx, "n2"); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if b.Alive("n2") {
		t.Fatal("n2 alive after Stop")
	}
	if err := b.Restart(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, faultWait, "n2 rejoined after a graceful stop", converged)

	if err := b.Pause("n2"); err != nil {
		t.Fatal(err)
	}
	if !b.Alive("n2") {
		t.Error("a paused node counts as alive")
	}
	if _, err := FetchCluster(ctx, node(b, "n2")); err == nil {
		t.Error("paused n2 still answers /-/cluster")
	}
	if err := b.Resume("n2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, faultWait, "converged after resume", converged)

	if err := b.Delay("n1", relay.Shape{Latency: 50 * time.Millisecond}); err != nil && !errors.Is(err, ErrUnsupported) {
		t.Errorf("Delay: %v", err)
	} else if err != nil {
		t.Logf("Delay unsupported here: %v", err)
	}
	if err := b.Loss("n1", 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, faultWait, "n1 unreachable at 100% loss", func(ctx context.Context) error {
		if _, err := FetchCluster(ctx, node(b, "n1")); err == nil {
			return errors.New("n1 still answers")
		}
		return nil
	})
	if err := b.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, faultWait, "converged after loss heal", converged)
}

func TestLocalBackend(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and iptables")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2)")
	}
	levee, demo := repoBins(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	b, err := NewLocal(Config{Nodes: 3, Dir: t.TempDir(), Bin: levee, Demo: demo,
		Secret: "chaos-test-secret", Admin: "chaos-admin-token-1", Log: testLogger(t)}, DefaultRoutes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Teardown() })
	start := time.Now()
	if err := b.Setup(ctx); errors.Is(err, ErrBusy) {
		t.Skipf("another chaos run uses the machine: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("setup took %v", time.Since(start))
	checkRules(t, b)
	checkDelay(t, ctx, b)
	exercise(t, ctx, b)
	if err := b.Teardown(); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("ip", "netns", "list").CombinedOutput(); containsNS(string(out)) {
		t.Fatalf("namespaces left: %s", out)
	}
	if err := b.Teardown(); err != nil {
		t.Fatalf("second Teardown: %v", err)
	}
}

// checkRules partitions n1 away and reads the rules back from n1's
// namespace, then heals and checks the chains are empty again.
func checkRules(t *testing.T, b *Local) {
	t.Helper()
	chain := func() string {
		out, err := exec.Command("ip", "netns", "exec", nsName(1), "iptables", "-S", chainIn).CombinedOutput()
		if err != nil {
			t.Fatalf("iptables -S: %v: %s", err, out)
		}
		return string(out)
	}
	if err := b.Partition([][]string{{"n1"}, {"n2", "n3"}}); err != nil {
		t.Fatal(err)
	}
	got := chain()
	for _, want := range []string{"-s 10.88.0.12/32 -j DROP", "-s 10.88.0.13/32 -j DROP"} {
		if !strings.Contains(got, want) {
			t.Errorf("n1 %s lacks %q:\n%s", chainIn, want, got)
		}
	}
	if strings.Contains(got, bridgeIP+"/32") {
		t.Errorf("partition blocks the bridge IP:\n%s", got)
	}
	if err := b.Heal(); err != nil {
		t.Fatal(err)
	}
	if got := chain(); strings.Contains(got, "DROP") {
		t.Errorf("rules left after Heal:\n%s", got)
	}
}

// checkDelay slows n1's links and sees it from outside: a TLS handshake
// with n1's advertised internal port, and a miss through n1 (forwarded to
// its owner or fetched by n1 from the upstream: either way one round trip
// on a slow link), each take at least one round trip's latency; after
// Heal the links carry no shape.
func checkDelay(t *testing.T, ctx context.Context, b *Local) {
	t.Helper()
	const oneWay = 600 * time.Millisecond // a round trip under the 2 s slow_call
	if err := b.Delay("n1", relay.Shape{Latency: oneWay}); err != nil {
		t.Fatalf("Delay: %v", err)
	}
	start := time.Now()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", nodeIP(1)+":"+raftPort,
		&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if err == nil {
		conn.Close()
	}
	if took := time.Since(start); took < 2*oneWay {
		t.Errorf("a TLS handshake with slowed n1's internal port took %v, want at least %v (%v)", took, 2*oneWay, err)
	}
	start = time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, node(b, "n1").URL+"/comments/stories/9001/comments", nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET through slowed n1: %v", err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != http.StatusOK || took < 2*oneWay {
		t.Errorf("a miss through slowed n1 answered %d after %v, want 200 after at least %v", resp.StatusCode, took, 2*oneWay)
	}
	if err := b.Heal(); err != nil {
		t.Fatal(err)
	}
	if s := b.links.of("n1"); !s.IsZero() {
		t.Errorf("n1 still shaped %v after Heal", s)
	}
}

func TestDockerBackend(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: nsenter into container namespaces")
	}
	if !Available() {
		t.Skip("no Docker engine answers `docker info`")
	}
	repoBins(t) // the images are built FROM scratch around them
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	compose, _ := filepath.Abs("../../docker-compose.yml")
	dir := t.TempDir()
	b, err := NewDocker(Config{Nodes: 3, Dir: dir, Compose: compose,
		Secret: "chaos-test-secret", Admin: "chaos-admin-token-1", Log: testLogger(t)}, DefaultRoutes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Teardown() })
	start := time.Now()
	if err := b.Setup(ctx); errors.Is(err, ErrBusy) {
		t.Skipf("another chaos run uses the machine: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("setup took %v", time.Since(start))
	checkMount(t, b, filepath.Join(dir, chaosConfFile))
	exercise(t, ctx, b)
	if err := b.Teardown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, overrideFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("override file left: %v", err)
	}
	if err := b.Teardown(); err != nil {
		t.Fatalf("second Teardown: %v", err)
	}
}

// checkMount checks n1 runs with the generated chaos config, not
// deploy/levee.yaml.
func checkMount(t *testing.T, b *Docker, conf string) {
	t.Helper()
	id, err := b.id("n1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("docker", "inspect", "-f",
		`{{range .Mounts}}{{.Source}}={{.Destination}};{{end}}`, id).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect: %v: %s", err, out)
	}
	if !strings.Contains(string(out), conf+"=/etc/levee/levee.yaml") {
		t.Errorf("n1 mounts %s, want %s at /etc/levee/levee.yaml", out, conf)
	}
}
