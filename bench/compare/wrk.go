package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// wrkCmd parses one wrk --latency output and appends its row.
func wrkCmd(args []string) error {
	fs := flag.NewFlagSet("compare wrk", flag.ContinueOnError)
	upstream := fs.String("upstream", "", "the demo upstream's base URL: record its calls since its stats were reset (the run's misses); \"\" = none")
	r := addRowFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("compare wrk: name one wrk output file")
	}
	row, err := r.row()
	if err != nil {
		return err
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := parseWrk(f)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	row.RPS, row.P99, row.Errors = res.RPS, res.P99, res.Errors
	if *upstream != "" {
		if row.Calls, err = upstreamCalls(strings.TrimSuffix(*upstream, "/"), ""); err != nil {
			return err
		}
	}
	return appendRow(r.out, row)
}

// wrkResult is what a table needs from one wrk run.
type wrkResult struct {
	RPS    float64
	P99    float64 // ms
	Errors int     // non-2xx/3xx answers plus socket errors
}

// parseWrk reads the lines of wrk 4 --latency output it needs:
//
//	99%    2.61ms
//	Non-2xx or 3xx responses: 12
//	Socket errors: connect 0, read 3, write 0, timeout 1
//	Requests/sec:  59311.42
func parseWrk(r io.Reader) (wrkResult, error) {
	var res wrkResult
	var haveRPS, haveP99 bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "99%":
			v, err := wrkDuration(f[1])
			if err != nil {
				return res, err
			}
			res.P99, haveP99 = v, true
		case len(f) == 2 && f[0] == "Requests/sec:":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return res, fmt.Errorf("Requests/sec %q: %w", f[1], err)
			}
			res.RPS, haveRPS = v, true
		case len(f) == 5 && f[0] == "Non-2xx":
			n, err := strconv.Atoi(f[4])
			if err != nil {
				return res, fmt.Errorf("non-2xx count %q: %w", f[4], err)
			}
			res.Errors += n
		case len(f) == 10 && f[0] == "Socket" && f[1] == "errors:":
			for _, i := range []int{3, 5, 7, 9} {
				n, err := strconv.Atoi(strings.TrimSuffix(f[i], ","))
				if err != nil {
					return res, fmt.Errorf("socket errors %q: %w", sc.Text(), err)
				}
				res.Errors += n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if !haveRPS || !haveP99 {
		return res, errors.New("no Requests/sec or 99% line: was wrk run with --latency?")
	}
	return res, nil
}

// wrkDuration reads wrk's latency format (its units: us, ms, s, m, h)
// into milliseconds.
func wrkDuration(s string) (float64, error) {
	units := []struct {
		suffix string
		ms     float64
	}{{"us", 0.001}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("latency %q: %w", s, err)
			}
			return v * u.ms, nil
		}
	}
	return 0, fmt.Errorf("latency %q: unknown unit", s)
}
