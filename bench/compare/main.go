package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  compare path hot | cold NAME                 the hot key's path, or a cold key's
  compare lua -keys N                          a wrk script drawing uniformly from N keys
  compare warm -base URL -keys N [-c 64]       GET keys 0..N-1 once each; every answer must be 200
  compare cold -targets URL[,URL...] -name NAME -upstream URL -row CASE,SERVER,ROUND -out FILE [-n 500]
                                               N concurrent requests for a cold key; appends a row
  compare wrk -row CASE,SERVER,ROUND -out FILE [-upstream URL] WRK_OUTPUT
                                               parse wrk --latency output (and count the
                                               upstream's calls since a reset); appends a row
  compare table RESULTS.tsv                    the markdown table of the medians`

var errUsage = errors.New(usage)

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "path":
		return pathCmd(args[1:], out)
	case "lua":
		return luaCmd(args[1:], out)
	case "warm":
		return warmCmd(args[1:])
	case "cold":
		return coldCmd(args[1:])
	case "wrk":
		return wrkCmd(args[1:])
	case "table":
		return tableCmd(args[1:], out)
	default:
		return fmt.Errorf("unknown command %q\n%w", args[0], errUsage)
	}
}
