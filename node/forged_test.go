package node

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/breaker"
	"github.com/levee/levee/clustertls"
	"github.com/levee/levee/connmux"
	"github.com/levee/levee/peer"
)

// TestLeaderRefusesForgedBreakerCommands: a caller holding the cluster's
// certificate that forwards to the leader a breaker command speaking for
// another node, naming a route the config lacks, or holding the route open
// for a year is refused (403) and no node's table changes; the same
// caller's own, in-bounds command commits everywhere.
func TestLeaderRefusesForgedBreakerCommands(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	leader := leaderIndex(c)
	sender := c.cfgs[(leader+1)%3].Node.Name
	openFor := c.cfgs[leader].Routes[0].Breaker.OpenFor.D()
	id, err := clustertls.FromSecrets(sender, clusterSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := peer.NewClient(peer.ClientConfig{Self: sender, Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		return connmux.Dial(ctx, addr, connmux.KindPeer, id.ClientConfig())
	}})
	defer cl.Close()
	forceOpen := func(node, route string, openFor time.Duration) []byte {
		b, err := breaker.Command{V: breaker.CommandVersion, Op: breaker.OpForceOpen, Route: route, Node: node,
			At: time.Now().UnixNano(), OpenFor: int64(openFor)}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	forged := map[string][]byte{
		"another node":  forceOpen(c.cfgs[leader].Node.Name, testRoute, openFor),
		"unknown route": forceOpen(sender, "nope", openFor),
		"open a year":   forceOpen(sender, testRoute, 365*24*time.Hour),
	}
	for name, data := range forged {
		_, err := cl.RaftApply(t.Context(), c.nodes[leader].internal.Addr().String(), data)
		if err == nil || !strings.Contains(err.Error(), "403") {
			t.Fatalf("%s: RaftApply = %v, want a 403 refusal", name, err)
		}
	}
	for _, i := range c.running() {
		if v := c.view(i); v.State != breaker.Closed || v.Transitions != 0 {
			t.Fatalf("node %d applied a forged command: %+v", i, v)
		}
	}
	c.waitFor(10*time.Second, "the sender's own command to commit", func() bool {
		_, err := cl.RaftApply(t.Context(), c.nodes[leaderIndex(c)].internal.Addr().String(), forceOpen(sender, testRoute, openFor))
		return err == nil // a leader change in between answers "not the leader": ask the new one
	})
	waitAllState(c, breaker.Open)
}
