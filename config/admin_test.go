package config

import (
	"strings"
	"testing"
)

// clustered is a valid one-route file of a clustered node with node block
// node (it needs a secret).
func clustered(node string) string {
	return "node: " + node + "\ncluster: {secret: " + testSecret + "}\n" + oneRoute("")
}

func TestNodeAdminAccepted(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unset by default", oneRoute(""), ""},
		{"own port", withNode("{admin: '127.0.0.1:9091'}"), "127.0.0.1:9091"},
		{"every interface", withNode("{admin: ':9091'}"), ":9091"},
		{"IPv6", withNode("{admin: '[::1]:9091'}"), "[::1]:9091"},
		{"host name", withNode("{admin: 'localhost:9091'}"), "localhost:9091"},
		{"free port beside a free port", withNode("{http: '127.0.0.1:0', admin: '127.0.0.1:0'}"), "127.0.0.1:0"},
		{"http's port on another interface", withNode("{http: '127.0.0.1:8080', admin: '10.0.0.5:8080'}"), "10.0.0.5:8080"},
		{"beside gossip and raft", clustered("{gossip: '127.0.0.1:7946', raft: '127.0.0.1:8300', admin: '127.0.0.1:9091'}"), "127.0.0.1:9091"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParse(t, tt.src).Node.Admin; got != tt.want {
				t.Fatalf("node.admin = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNodeAdminRejected(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"no port", withNode("{admin: '127.0.0.1'}"), `node.admin: must be host:port, got "127.0.0.1"`},
		{"not an address", withNode("{admin: 'a b:1'}"), "node.admin: must be host:port"},
		{"port out of range", withNode("{admin: '127.0.0.1:70000'}"), "node.admin: must be host:port"},
		{"node.http's address", withNode("{admin: '127.0.0.1:8080'}"), `node.admin: "127.0.0.1:8080" is also node.http`},
		{"node.http's port on every interface", withNode("{admin: ':8080'}"),
			`node.admin: ":8080" takes the port of node.http ("127.0.0.1:8080")`},
		{"node.http on every interface", withNode("{http: '0.0.0.0:8080', admin: '127.0.0.1:8080'}"),
			`node.admin: "127.0.0.1:8080" takes the port of node.http ("0.0.0.0:8080")`},
		{"node.gossip's address", clustered("{gossip: '127.0.0.1:7946', admin: '127.0.0.1:7946'}"), `node.admin: "127.0.0.1:7946" is also node.gossip`},
		{"node.raft's address", clustered("{raft: '127.0.0.1:8300', admin: '127.0.0.1:8300'}"), `node.admin: "127.0.0.1:8300" is also node.raft`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestSetNodeAdmin: node.admin is a key like any other for flags and
// LEVEE_* variables, checked by Validate after the last Set.
func TestSetNodeAdmin(t *testing.T) {
	c := mustParse(t, oneRoute(""))
	if err := c.Set("node.admin", "127.0.0.1:9091"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.Node.Admin != "127.0.0.1:9091" {
		t.Fatalf("after Set: node.admin %q, Validate %v", c.Node.Admin, err)
	}
	if err := c.Set("node.admin", c.Node.HTTP); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "node.admin") {
		t.Fatalf("node.admin = node.http: Validate = %v, want a node.admin error", err)
	}
}
