//go:build race

package main

// raceEnabled: this test binary, and a node it starts as itself, run
// with the race detector, which multiplies memory.
const raceEnabled = true
