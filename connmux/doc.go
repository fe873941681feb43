// Package connmux serves several protocols on one mutual-TLS port: after
// the handshake, a connection's first byte says which protocol it speaks,
// and the Mux hands it to that protocol's net.Listener. It is how Levee's
// internal port carries both Raft and the node-to-node peer messages, as
// Consul's server RPC port (agent/consul/rpc.go, one type byte per
// connection) and rqlite's tcp.Mux do.
//
// Unlike Consul's, the byte travels inside TLS: nothing is read from a
// connection, not even its type, before the peer has proved it holds a
// certificate the cluster trusts. A connection whose first byte names no
// registered kind goes to the Default listener with that byte put back:
// hashicorp/raft's connections start with an RPC type (0–3) and need no
// prefix, so nodes of the release before the peer port still reach Raft.
package connmux
