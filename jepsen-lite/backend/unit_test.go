package backend

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/levee/levee/config"
	"github.com/levee/levee/jepsen-lite/relay"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(nodes int) Config {
	return Config{Nodes: nodes, Dir: "/tmp/x", Secret: "chaos-secret-123456", Admin: "chaos-admin-token-1"}
}

func TestLocalNodeYAMLValidates(t *testing.T) {
	cases := []struct {
		name      string
		nodes, i  int
		bootstrap int
	}{
		{"3 nodes, n1", 3, 1, 3},
		{"3 nodes, n3", 3, 3, 3},
		{"5 nodes, n5", 5, 5, 3},
		{"1 node", 1, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := DefaultRoutes()
			data, err := localNodeYAML(testConfig(tc.nodes), r, tc.i, "/tmp/x/"+nodeName(tc.i))
			if err != nil {
				t.Fatal(err)
			}
			c, err := config.Parse(data)
			if err != nil {
				t.Fatalf("generated config does not validate: %v\n%s", err, data)
			}
			ip := nodeIP(tc.i)
			checkEq(t, "name", c.Node.Name, nodeName(tc.i))
			checkEq(t, "http", c.Node.HTTP, ip+":8080")
			checkEq(t, "gossip", c.Node.Gossip, ip+":7946")
			// The internal port hides behind its relay, which peers reach
			// at the advertised address (see links).
			checkEq(t, "raft", c.Node.Raft, "127.0.0.1:8300")
			checkEq(t, "advertised raft", c.Node.Advertised(c.Node.Raft), ip+":8300")
			checkEq(t, "join", len(c.Node.Join), tc.nodes)
			checkEq(t, "bootstrap_expect", c.Node.BootstrapExpect, tc.bootstrap)
			checkEq(t, "rejoin_interval", c.Cluster.RejoinInterval.D(), 2*time.Second)
			checkEq(t, "secret", c.Cluster.Secret, "chaos-secret-123456")
			checkRoute(t, c, "http://127.0.0.1:9000/api/", r)
		})
	}
}

func TestDockerSharedYAMLValidates(t *testing.T) {
	r := Routes{Fresh: time.Second, Stale: 2 * time.Second, StaleIfError: time.Minute,
		BreakerFailures: 5, BreakerOpenFor: 7 * time.Second, SlowCall: 900 * time.Millisecond,
		CachePersist: true, CachePersistInterval: 3 * time.Second, QueueVisibilityTimeout: 7 * time.Second}
	data, err := dockerSharedYAML(testConfig(5), r)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(data)
	if err != nil {
		t.Fatalf("generated config does not validate: %v\n%s", err, data)
	}
	checkEq(t, "http", c.Node.HTTP, "0.0.0.0:8080")
	checkEq(t, "data_dir", c.Node.DataDir, "/data")
	checkRoute(t, c, "http://demo-upstream:9000/api/", r)
}

// checkRoute checks the comments route carries r's windows.
func checkRoute(t *testing.T, c *config.Config, upstream string, r Routes) {
	t.Helper()
	rt, ok := c.RouteFor("/comments/stories/1")
	if !ok {
		t.Fatal("no route for /comments/")
	}
	checkEq(t, "route name", rt.Name, "comments")
	checkEq(t, "upstream", rt.Upstream, upstream)
	checkEq(t, "tenant_header", rt.TenantHeader, "X-Tenant")
	checkEq(t, "fresh", rt.Cache.Fresh.D(), r.Fresh)
	checkEq(t, "stale", rt.Cache.Stale.D(), r.Stale)
	checkEq(t, "stale_if_error", rt.Cache.StaleIfError.D(), r.StaleIfError)
	checkEq(t, "failures", rt.Breaker.Failures, r.BreakerFailures)
	checkEq(t, "open_for", rt.Breaker.OpenFor.D(), r.BreakerOpenFor)
	checkEq(t, "slow_call", rt.Breaker.SlowCall.D(), r.SlowCall)
	checkEq(t, "budget", rt.Retry.Budget.D(), retryBudget)
	checkEq(t, "max_attempts", rt.Retry.MaxAttempts, 2)
	checkEq(t, "cache.persist", c.Cache.Persist, r.CachePersist)
	checkEq(t, "cache.persist_interval", c.Cache.PersistInterval.D(), r.CachePersistInterval)
	checkEq(t, "cache.max_bytes (default kept)", int64(c.Cache.MaxBytes), 256<<20)
	checkEq(t, "queue.visibility_timeout", c.Queue.VisibilityTimeout.D(), r.QueueVisibilityTimeout)
	checkEq(t, "queue.max_jobs (default kept)", c.Queue.MaxJobs, config.DefaultQueue().MaxJobs)
	checkEq(t, "queue.dead_letter_after (default kept)", c.Queue.DeadLetterAfter, config.DefaultQueue().DeadLetterAfter)
}

func checkEq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestDockerOverrideYAML(t *testing.T) {
	data, err := dockerOverrideYAML("/run/chaos.yaml", 42)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Restart string   `yaml:"restart"`
			Command []string `yaml:"command"`
			Volumes []struct {
				Type, Source, Target string
				ReadOnly             bool `yaml:"read_only"`
			} `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		s, ok := doc.Services[n]
		if !ok || s.Restart != "no" || len(s.Volumes) != 1 {
			t.Fatalf("%s: %+v", n, s)
		}
		v := s.Volumes[0]
		if v.Source != "/run/chaos.yaml" || v.Target != "/etc/levee/levee.yaml" || !v.ReadOnly || v.Type != "bind" {
			t.Errorf("%s volume %+v", n, v)
		}
	}
	up := doc.Services["demo-upstream"]
	if !slices.Contains(up.Command, "200000") || !slices.Contains(up.Command, "42") || up.Restart != "no" {
		t.Errorf("demo-upstream %+v", up)
	}
}

func TestRestoreScript(t *testing.T) {
	cases := []struct {
		name string
		r    ruleSet
		want []string
	}{
		{"empty flushes both chains", ruleSet{}, nil},
		{"partition drops both ways, sorted", ruleSet{blocked: map[string]bool{"10.88.0.13": true, "10.88.0.12": true}}, []string{
			"-A LEVEE-CHAOS-IN -s 10.88.0.12 -j DROP", "-A LEVEE-CHAOS-OUT -d 10.88.0.12 -j DROP",
			"-A LEVEE-CHAOS-IN -s 10.88.0.13 -j DROP", "-A LEVEE-CHAOS-OUT -d 10.88.0.13 -j DROP"}},
		{"loss", ruleSet{lossPct: 25}, []string{
			"-A LEVEE-CHAOS-IN -m statistic --mode random --probability 0.25 -j DROP",
			"-A LEVEE-CHAOS-OUT -m statistic --mode random --probability 0.25 -j DROP"}},
		{"partition then loss", ruleSet{blocked: map[string]bool{"10.88.0.11": true}, lossPct: 100}, []string{
			"-A LEVEE-CHAOS-IN -s 10.88.0.11 -j DROP", "-A LEVEE-CHAOS-OUT -d 10.88.0.11 -j DROP",
			"-A LEVEE-CHAOS-IN -m statistic --mode random --probability 1.00 -j DROP",
			"-A LEVEE-CHAOS-OUT -m statistic --mode random --probability 1.00 -j DROP"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := append([]string{"*filter", ":LEVEE-CHAOS-IN - [0:0]", ":LEVEE-CHAOS-OUT - [0:0]"}, tc.want...)
			want = append(want, "COMMIT", "")
			if got := strings.Split(tc.r.restoreScript(), "\n"); !slices.Equal(got, want) {
				t.Errorf("script\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestJumpRuleSkipsLoopback(t *testing.T) {
	cases := []struct {
		builtin string
		want    string
	}{
		{"INPUT", "INPUT ! -i lo -j LEVEE-CHAOS-IN"},
		{"OUTPUT", "OUTPUT ! -o lo -j LEVEE-CHAOS-OUT"},
	}
	for _, tc := range cases {
		t.Run(tc.builtin, func(t *testing.T) {
			checkEq(t, "rule", strings.Join(jumpRule(tc.builtin), " "), tc.want)
		})
	}
}

func TestPartitionBlocks(t *testing.T) {
	ips := map[string]string{"n1": "ip1", "n2": "ip2", "n3": "ip3", "n4": "ip4"}
	cases := []struct {
		name    string
		groups  [][]string
		want    map[string][]string
		wantErr bool
	}{
		{"isolate one", [][]string{{"n1"}, {"n2", "n3", "n4"}}, map[string][]string{
			"n1": {"ip2", "ip3", "ip4"}, "n2": {"ip1"}, "n3": {"ip1"}, "n4": {"ip1"}}, false},
		{"unlisted node keeps links", [][]string{{"n1"}, {"n2"}}, map[string][]string{
			"n1": {"ip2"}, "n2": {"ip1"}}, false},
		{"three groups", [][]string{{"n1"}, {"n2"}, {"n3", "n4"}}, map[string][]string{
			"n1": {"ip2", "ip3", "ip4"}, "n2": {"ip1", "ip3", "ip4"}, "n3": {"ip1", "ip2"}, "n4": {"ip1", "ip2"}}, false},
		{"one group cuts nothing", [][]string{{"n1", "n2"}}, map[string][]string{"n1": nil, "n2": nil}, false},
		{"unknown node", [][]string{{"n9"}, {"n1"}}, nil, true},
		{"overlapping groups: ring of pairs", [][]string{{"n1", "n2"}, {"n2", "n3"}, {"n3", "n4"}, {"n4", "n1"}}, map[string][]string{
			"n1": {"ip3"}, "n2": {"ip4"}, "n3": {"ip1"}, "n4": {"ip2"}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := partitionBlocks(tc.groups, ips)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for n, want := range tc.want {
				var have []string
				for ip := range got[n] {
					have = append(have, ip)
				}
				slices.Sort(have)
				if !slices.Equal(have, want) {
					t.Errorf("%s blocks %v, want %v", n, have, want)
				}
			}
		})
	}
}

func TestUnknownNodeIsSentinel(t *testing.T) {
	_, err := partitionBlocks([][]string{{"nx"}}, map[string]string{})
	if !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("err = %v", err)
	}
}

func TestNetemArgs(t *testing.T) {
	ms := time.Millisecond
	checkEq(t, "args", strings.Join(netemArgs("eth0", relay.Shape{Latency: 150 * ms}), " "),
		"tc qdisc replace dev eth0 root netem delay 150ms")
	checkEq(t, "sub-ms rounds up", strings.Join(netemArgs("eth0", relay.Shape{Latency: time.Microsecond}), " "),
		"tc qdisc replace dev eth0 root netem delay 1ms")
	checkEq(t, "jitter and rate", strings.Join(netemArgs("eth0", relay.Shape{Latency: 300 * ms, Jitter: 100 * ms, Bandwidth: 262144}), " "),
		"tc qdisc replace dev eth0 root netem delay 300ms 100ms rate 262144bps")
}

func TestLinksShapeAConnectionByBothEnds(t *testing.T) {
	ms := time.Millisecond
	l := newLinks(map[string]string{"n1": "10.88.0.11", "n2": "10.88.0.12", "n3": "10.88.0.13"})
	slow := relay.Shape{Latency: 300 * ms, Jitter: 100 * ms, Bandwidth: 64 << 10}
	if err := l.set("n2", slow); err != nil {
		t.Fatal(err)
	}
	addr := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	cases := []struct {
		name, into, from string
		want             relay.Shape
	}{
		{"into the slow node from a peer", "n2", "10.88.0.11:40000", slow},
		{"out of the slow node into a peer", "n1", "10.88.0.12:40000", slow},
		{"between two healthy nodes", "n1", "10.88.0.13:40000", relay.Shape{}},
		{"the slow node to its upstream", "n2", "127.0.0.1:40000", slow},
		{"a healthy node to its upstream", "n3", "127.0.0.1:40000", relay.Shape{}},
		{"the slow node to itself", "n2", "10.88.0.12:40000", slow.Plus(slow)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := l.into(c.into)(addr(c.from)); got != c.want {
				t.Fatalf("into(%s) from %s = %v, want %v", c.into, c.from, got, c.want)
			}
		})
	}
	if err := l.set("n1", relay.Shape{Latency: -ms}); !errors.Is(err, relay.ErrBadShape) {
		t.Fatalf("set(negative latency) = %v, want ErrBadShape", err)
	}
	l.reset()
	if got := l.into("n1")(addr("10.88.0.12:40000")); !got.IsZero() {
		t.Fatalf("after reset a link still has shape %v", got)
	}
}

func TestCheckConfig(t *testing.T) {
	cases := []struct {
		name  string
		mod   func(*Config)
		local bool
		ok    bool
	}{
		{"docker ok", func(*Config) {}, false, true},
		{"too many nodes", func(c *Config) { c.Nodes = 6 }, false, false},
		{"no nodes", func(c *Config) { c.Nodes = 0 }, false, false},
		{"no dir", func(c *Config) { c.Dir = "" }, false, false},
		{"short secret", func(c *Config) { c.Secret = "short" }, false, false},
		{"no secret", func(c *Config) { c.Secret = "" }, false, false},
		{"short admin token", func(c *Config) { c.Admin = "admin" }, false, false},
		{"local without binaries", func(c *Config) { c.Bin = "/nonexistent/levee" }, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(3)
			tc.mod(&c)
			if err := checkConfig(c, tc.local); (err == nil) != tc.ok {
				t.Errorf("checkConfig = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestParsePids(t *testing.T) {
	cases := []struct {
		name string
		out  string
		want []int
	}{
		{"lines", "123\n456\n", []int{123, 456}},
		{"empty", "", nil},
		{"never init or negative", "1\n-1\n0\nabc\n77", []int{77}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := parsePids(tc.out); !slices.Equal(got, tc.want) {
				t.Errorf("parsePids = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestContainsNS(t *testing.T) {
	cases := []struct {
		name string
		list string
		want bool
	}{
		{"ours with id", "lvch-n2 (id: 3)\nother\n", true},
		{"ours bare", "lvch-n1", true},
		{"others only", "blue (id: 0)\nlvchx\n", false},
		{"empty", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkEq(t, "containsNS", containsNS(tc.list), tc.want)
		})
	}
}

func FuzzParsePids(f *testing.F) {
	f.Add("123\n456\n")
	f.Add("1\n-1\n0\n")
	f.Add("lvch-n1 (id: 0)\n")
	f.Fuzz(func(t *testing.T, out string) {
		for _, pid := range parsePids(out) {
			if pid <= 1 {
				t.Fatalf("parsePids(%q) returned %d", out, pid)
			}
		}
		_ = containsNS(out)
	})
}

func TestParseProcState(t *testing.T) {
	cases := []struct {
		name, stat, want string
		ok               bool
	}{
		{"stopped", "123 (levee) T 1 2 3", "T", true},
		{"name with spaces and parens", "123 (a) b) S 1", "S", true},
		{"no paren", "123 levee T", "", false},
		{"nothing after", "123 (levee)", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcState(tc.stat)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("parseProcState = %q, %v; want %q ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}

func FuzzParseProcState(f *testing.F) {
	f.Add("123 (levee) T 1 2 3")
	f.Add("1 ()) R")
	f.Add("")
	f.Fuzz(func(t *testing.T, stat string) {
		if st, err := parseProcState(stat); err == nil && st == "" {
			t.Fatalf("empty state without error for %q", stat)
		}
	})
}

func TestRunLockExcludes(t *testing.T) {
	kind := "unit-test-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { os.Remove(lockPath(kind)) })
	first, err := acquire(t.Context(), kind)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if second, err := acquire(ctx, kind); !errors.Is(err, ErrBusy) {
		second.release()
		t.Fatalf("second acquire while the first holds the lock: %v, want ErrBusy", err)
	}
	first.release()
	first.release() // idempotent
	again, err := acquire(t.Context(), kind)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	again.release()
}

func TestLocalStopIsGracefulThenKills(t *testing.T) {
	cases := []struct {
		name    string
		script  string // run by sh
		timeout bool
	}{
		{name: "a process that exits on SIGTERM", script: `touch "$0"; exec sleep 60`},
		{name: "a process that ignores SIGTERM is killed", script: `trap "" TERM; touch "$0"; exec sleep 60`, timeout: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ready := dir + "/ready" // the script's signal dispositions are set
			p, err := startProc([]string{"sh", "-c", tc.script, ready}, dir+"/n1.log")
			if err != nil {
				t.Fatal(err)
			}
			defer p.kill()
			waitForFile(t, ready)
			l := &Local{procs: map[string]*proc{"n1": p}}
			// The ignoring case gives up through ctx, not StopTimeout, so
			// the test stays fast.
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err = l.Stop(ctx, "n1")
			if got := errors.Is(err, ErrStopTimeout); got != tc.timeout {
				t.Fatalf("Stop = %v, want timeout %v", err, tc.timeout)
			}
			if !tc.timeout && err != nil {
				t.Fatal(err)
			}
			if l.Alive("n1") {
				t.Error("n1 alive after Stop")
			}
		})
	}
}

func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestInNetnsLeavesNoThreadInTheNamespace runs sockets into a scratch
// namespace many times, then checks no thread of this process is left
// in it: `ip netns pids` would list the process, and Teardown kill it.
func TestInNetnsLeavesNoThreadInTheNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: ip netns add")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2)")
	}
	ns := namePrefix + "-test-" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	exec.Command("ip", "-n", ns, "link", "set", "lo", "up").Run()
	var lns []net.Listener
	for range 50 {
		var ln net.Listener
		if err := inNetns(ns, func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	for _, ln := range lns {
		ln.Close()
	}
	out, err := exec.Command("ip", "netns", "pids", ns).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns pids: %v: %s", err, out)
	}
	if slices.Contains(parsePids(string(out)), os.Getpid()) {
		t.Fatalf("this process is still in %s", ns)
	}
	self, _ := os.Readlink("/proc/self/ns/net")
	entries, _ := os.ReadDir("/proc/self/task")
	for _, e := range entries {
		if got, _ := os.Readlink("/proc/self/task/" + e.Name() + "/ns/net"); got != self {
			t.Fatalf("thread %s is in %s, not the process's namespace %s", e.Name(), got, self)
		}
	}
}
