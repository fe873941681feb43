// Command storm measures a 429 storm from the upstream's side: how many
// calls per second the upstream receives before, during and after a window
// in which it answers every call 429 with Retry-After, whatever proxy
// (a Levee cluster, nginx) stands in front of it.
//
// Data flow of one run (storm run):
//
//	heal the demo upstream and zero its call log → open-loop GETs at a
//	fixed rate over many keys, round-robin over the proxies → at
//	Before, POST /-/faults ratelimit; at Before+Storm, DELETE /-/faults →
//	wait for the last answers → read the upstream's call log (arrival,
//	answer, status, Retry-After of every call) → per-second counts,
//	Retry-After windows, the clients' status mix → JSON result.
//
// storm table reads the JSON results of several runs and prints the
// markdown tables of docs/benchmarks.md; storm wait polls until proxies
// (and a Levee cluster's members and Raft leader) are up. The whole
// procedure is scripts/storm-bench.sh; bench/storm/README.md explains the
// scenario and the nginx configuration.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  storm run   -label L -targets URL[,URL...] [flags]   one measured run, JSON to -out
  storm table RESULT.json...                           markdown tables of the runs
  storm wait  -targets URL[,URL...] [-members N]       until every target answers
run "storm run -h" for the flags`

var errUsage = errors.New(usage)

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], out)
	case "table":
		return tableCmd(args[1:], out)
	case "wait":
		return waitCmd(args[1:])
	default:
		return fmt.Errorf("unknown command %q\n%w", args[0], errUsage)
	}
}
