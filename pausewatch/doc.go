// Package pausewatch tells a process that it was stopped: a SIGSTOP, a
// frozen VM or container, a stall long enough for its peers to declare it
// dead.
//
// A stopped process cannot know it was stopped while it is, and nothing
// in its own state says so once it runs again: its gossip still lists it
// alive, its ring still gives it its keys. Its peers meanwhile declared it
// dead and moved those keys to their successors, which fetched them. As
// the process resumes, the requests queued in its sockets are served at
// once, before its peers hear it is back: for about a second the key has
// two owners, and each fetches it (a soak's coalescing failures at the end
// of every pause window, docs/chaos.md).
//
// A [Watch] notices the stop by the clock: a goroutine beats every Tick
// and records the monotonic time of its last beat. A gap of more than Gap
// between two beats is a stop (or a stall the peers cannot tell from
// one), and the Watch is held for Hold from the beat that saw it. Held
// also answers true when the last beat is more than Gap ago, so a request
// served in the first instants after the resume, before the beating
// goroutine has run again, already knows.
//
// Data flow: node wires one Watch per process (Gap from gossip's failure
// detection, Hold long enough for the peers to see the node back and hand
// its keys' copies back) and hands its Held and Resumed methods to the
// parts that act on them: the API, which sends the requests of keys this
// node owns to the key's successor while held, and the proxy, which
// confirms the answers it stored before the resume with its peers.
//
// The idea is the one behind Go's own sysmon and the JVM's safepoint
// watchdogs, and behind memberlist's "awareness" of its own health: judge
// from a missed deadline of one's own.
package pausewatch
