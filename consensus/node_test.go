package consensus

import (
	"errors"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.NodeID, c.BindAddr, c.DataDir = "n1", "127.0.0.1:0", "/tmp/x"
		return c
	}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr bool
	}{
		{"defaults", func(*Config) {}, false},
		{"zero values take defaults", func(c *Config) { *c = Config{NodeID: "n1", BindAddr: "127.0.0.1:0", InMemory: true} }, false},
		{"unspecified bind needs advertise", func(c *Config) { c.BindAddr = "0.0.0.0:7000" }, true},
		{"unspecified bind with advertise", func(c *Config) { c.BindAddr, c.AdvertiseAddr = ":7000", "10.0.0.1:7000" }, false},
		{"fast timings", func(c *Config) { c.Timings = FastTimings() }, false},
		{"no node id", func(c *Config) { c.NodeID = "" }, true},
		{"no data dir", func(c *Config) { c.DataDir = "" }, true},
		{"in memory needs no data dir", func(c *Config) { c.DataDir, c.InMemory = "", true }, false},
		{"bad bind addr", func(c *Config) { c.BindAddr = "nope" }, true},
		{"bad advertise addr", func(c *Config) { c.AdvertiseAddr = "nope" }, true},
		{"negative expect", func(c *Config) { c.BootstrapExpect = -1 }, true},
		{"negative dead after", func(c *Config) { c.DeadAfter = -time.Second }, true},
		{"lease above heartbeat", func(c *Config) {
			c.Timings = Timings{HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond,
				LeaderLeaseTimeout: time.Second, CommitTimeout: 5 * time.Millisecond}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(&c)
			err := c.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestLifecycleAndErrors(t *testing.T) {
	cfg := Config{NodeID: "solo", BindAddr: "127.0.0.1:0", InMemory: true, Timings: FastTimings(),
		Logger: testLogger(t)}
	n, err := New(cfg, newTestSM())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Propose(t.Context(), []byte("a=1")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Propose before Start = %v, want ErrClosed", err)
	}
	if got := n.State().State; got != "NotStarted" {
		t.Fatalf("State before Start = %q", got)
	}
	if !n.Restarted() {
		t.Fatal("Restarted before Start = false: a node that has not read its disk may hold saved state")
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n.Restarted() {
		t.Fatal("Restarted after a Start that found no state = true")
	}
	if err := n.Start(t.Context()); err == nil {
		t.Fatal("second Start succeeded")
	}

	// Alone and unbootstrapped: no leader, and ApplyLocal refuses.
	if _, err := n.ApplyLocal(t.Context(), []byte("a=1")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ApplyLocal on non-leader = %v, want ErrNotLeader", err)
	}
	if _, err := n.Propose(ctxTimeout(t, 200*time.Millisecond), []byte("a=1")); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Propose without leader = %v, want ErrNoLeader", err)
	}

	n.Reconcile([]Peer{{ID: "solo", RaftAddr: n.Addr()}}) // BootstrapExpect defaults to 1
	if err := n.WaitForLeader(ctxTimeout(t, 15*time.Second)); err != nil {
		t.Fatal(err)
	}
	out, err := n.Propose(t.Context(), []byte("a=5"))
	if err != nil || string(out) != "5" {
		t.Fatalf("Propose = %q, %v", out, err)
	}
	if err := n.WaitForApplied(t.Context(), n.State().CommitIndex); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitForApplied(ctxTimeout(t, 50*time.Millisecond), 1<<40); !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitForApplied(far future) = %v, want ErrTimeout", err)
	}
	if err := n.StepDown(t.Context()); err != nil { // sole voter: nothing to hand over
		t.Fatal(err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := n.Propose(t.Context(), []byte("a=1")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Propose after Close = %v, want ErrClosed", err)
	}
	if err := n.Start(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close = %v, want ErrClosed", err)
	}
}

func TestFollowerWithoutForward(t *testing.T) {
	c := newCluster(t, clusterOpts{inmemTransport: true, tune: func(cfg *Config) { cfg.Forward = nil }})
	leader := c.formCluster("n1", "n2", "n3")
	_, err := c.follower(leader).node.Propose(ctxTimeout(t, 2*time.Second), []byte("a=1"))
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Propose on follower without Forward = %v, want ErrNotLeader", err)
	}
}
