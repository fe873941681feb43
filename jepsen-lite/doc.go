// Command jepsen-lite is Levee's Jepsen-style chaos harness: it runs a
// cluster (local network namespaces or docker compose), reads through it
// with concurrent clients while a seeded nemesis breaks nodes, links and
// the upstream, records the history, and checks it against the brief's
// promises. See jepsen-lite/README.md.
//
// Exit status: 0 all checkers passed, 1 a violation, 2 a harness error or
// an interrupted run.
package main
