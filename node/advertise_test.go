package node

import (
	"net"
	"strings"
	"testing"

	"github.com/levee/levee/config"
)

// TestMembersAdvertiseTheAdvertiseHost: a node bound to every interface
// gossips node.advertise with its bound ports, for the API and for the
// internal port, never the wildcard address it bound.
func TestMembersAdvertiseTheAdvertiseHost(t *testing.T) {
	c := newTestCluster(t, 1, func(_ int, cfg *config.Config) {
		cfg.Node.HTTP, cfg.Node.Raft, cfg.Node.Advertise = "0.0.0.0:0", "0.0.0.0:0", "127.0.0.1"
	})
	m, ok := c.nodes[0].cluster.Membership.Member(c.nodes[0].Name())
	if !ok {
		t.Fatal("the node does not see itself")
	}
	for what, addr := range map[string]string{"http": m.HTTPAddr, "raft": m.RaftAddr, "peer": m.PeerAddr} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" || port == "0" {
			t.Errorf("%s address %q, want 127.0.0.1 with the bound port", what, addr)
		}
	}
	if !strings.HasSuffix(m.HTTPAddr, ":"+portOf(t, c.nodes[0].HTTPAddr())) {
		t.Errorf("http address %q is not the bound port of %q", m.HTTPAddr, c.nodes[0].HTTPAddr())
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}
