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
