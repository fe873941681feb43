package node

// FastTimings is fastTimings for the tests in package node_test, which
// start nodes through the exported API only: the Raft and gossip speeds
// this package's in-process clusters run at on a loaded 2-core machine.
var FastTimings = fastTimings
