package consensus

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/levee/levee/clustertls"
)

// tlsFor gives every node of a test cluster an identity of secret.
func tlsFor(t *testing.T, secret string) func(*Config) {
	t.Helper()
	ca, err := clustertls.Derive(secret)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) {
		id, err := clustertls.New(clustertls.Config{Name: c.NodeID, Issuer: ca})
		if err != nil {
			t.Fatal(err)
		}
		c.TLS = &TLS{Server: id.ServerConfig(), Client: id.ClientConfig()}
	}
}

// TestRaftOverMutualTLSRefusesPeersWithoutTheSecret: a cluster whose Raft
// transport is mutual TLS forms, replicates and forwards as over TCP; an
// AppendEntries with a far higher term, sent in clear or over TLS with a
// certificate of another secret, is refused and deposes nobody.
func TestRaftOverMutualTLSRefusesPeersWithoutTheSecret(t *testing.T) {
	c := newCluster(t, clusterOpts{tune: tlsFor(t, "the-cluster-secret-for-tls-tests")})
	leader := c.formCluster("n1", "n2", "n3")
	if got := c.propose(c.follower(leader), "a=1"); got != "1" {
		t.Fatalf("forwarded proposal over TLS = %q", got)
	}
	term := leader.node.State().Term
	// Without TLS this request is accepted (Success, term+100) and deposes
	// the leader.
	forged := &raft.AppendEntriesRequest{Term: term + 100, Leader: []byte("evil"),
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte("evil")}}

	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	attackers := map[string]raft.Transport{"plain TCP": plain}
	otherTLS := &Config{NodeID: "evil"}
	tlsFor(t, "another-secret-nobody-trusts-000")(otherTLS)
	stream, err := listenTLS("127.0.0.1:0", nil, *otherTLS.TLS)
	if err != nil {
		t.Fatal(err)
	}
	wrongCA := raft.NewNetworkTransport(stream, 1, time.Second, nil)
	defer wrongCA.Close()
	attackers["TLS with another secret's certificate"] = wrongCA

	for name, tr := range attackers {
		for _, target := range c.live() {
			var resp raft.AppendEntriesResponse
			err := tr.AppendEntries(raft.ServerID(target.id), raft.ServerAddress(target.node.Addr()), forged, &resp)
			if err == nil {
				t.Fatalf("%s: %s accepted a forged AppendEntries (resp %+v)", name, target.id, resp)
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	for _, tn := range c.live() {
		if got := tn.node.State().Term; got > term {
			t.Fatalf("%s moved to term %d after forged RPCs (was %d)", tn.id, got, term)
		}
	}
	if !leader.node.IsLeader() {
		t.Fatal("the leader was deposed by forged RPCs")
	}
}
