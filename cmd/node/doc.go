// Command levee runs one Levee node, and operates a running cluster.
//
//	levee -config levee.yaml [-node.http 127.0.0.1:8080 ...]   run a node
//	levee status | members | breakers                          what a node sees
//	levee breaker open|close ROUTE                             force a breaker
//	levee owner PATH [-tenant T]                               a key's owner and replicas
//	levee purge PATH [-tenant T] | -route R                    remove cached answers
//	levee jobs [-state dead] | job replay ID                   the durable queue
//	levee leave | remove NODE | recover -config FILE -voters   Raft seats
//	levee check -config FILE                                   print the effective config
//	levee health | secret | version | help [COMMAND]
//
// Every node, cluster and cache setting in the file can be overridden by a
// flag named after its key (-node.http) and by an environment variable
// (LEVEE_NODE_HTTP); flags win over the environment, which wins over the file.
//
// The commands that ask a node go through one client (client.go): -addr
// or LEVEE_ADDR names the node's admin listener, the admin token comes
// from LEVEE_ADMIN_TOKEN or -token-file, -json prints the node's own JSON.
// Each command has a usage text (levee help COMMAND, levee COMMAND -h).
//
// Exit codes: 0 done (or a clean shutdown), 1 the node answered an error
// or a command failed (the reason is printed), 2 a usage error or a bad
// config file, 3 the node could not be reached. levee health exits 0 or 1
// only, as container healthchecks expect.
package main
