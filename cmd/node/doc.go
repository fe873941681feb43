// Command levee runs one Levee node, and operates a running cluster.
//
//	levee -config levee.yaml [-node.http 127.0.0.1:8080 ...]
//	levee health [-url http://127.0.0.1:8080/-/readyz]
//	levee leave [-addr URL]          give up this node's Raft seat, then stop
//	levee remove [-addr URL] NODE    give up a dead node's Raft seat
//	levee recover -config FILE -voters n1=ADDR,...   unwedge a stopped cluster
//	levee secret [-env]              print a fresh cluster.secret (or admin token)
//
// Every node, cluster and cache setting in the file can be overridden by a
// flag named after its key (-node.http) and by an environment variable
// (LEVEE_NODE_HTTP); flags win over the environment, which wins over the file.
//
// Exit codes: 0 done (or a clean shutdown), 1 a failure or a refusal (the
// reason is printed), 2 a usage error or a bad config file.
package main
