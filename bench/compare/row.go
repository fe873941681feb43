package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Row is one measurement: one server, one case, one round.
type Row struct {
	Case   string
	Server string
	Round  int
	// RPS is wrk's requests per second; 0 for the cold case.
	RPS float64
	// P99 is the 99th-percentile latency in milliseconds.
	P99 float64
	// Calls is the upstream's calls for the cold key; for a wrk case, its
	// calls during the measured run (0: every request was a hit); -1 when
	// not counted.
	Calls int
	// Errors counts answers other than 200 (wrk: non-2xx/3xx plus socket
	// errors).
	Errors int
}

// rowFlags are the flags naming the row a command appends.
type rowFlags struct {
	spec string // CASE,SERVER,ROUND
	out  string
}

func addRowFlags(fs *flag.FlagSet) *rowFlags {
	r := &rowFlags{}
	fs.StringVar(&r.spec, "row", "", "CASE,SERVER,ROUND of the appended row (required)")
	fs.StringVar(&r.out, "out", "", "TSV file the row is appended to (required)")
	return r
}

func (r *rowFlags) row() (Row, error) {
	parts := strings.Split(r.spec, ",")
	if len(parts) != 3 || r.out == "" {
		return Row{}, errors.New("-row CASE,SERVER,ROUND and -out FILE are required")
	}
	round, err := strconv.Atoi(parts[2])
	if err != nil {
		return Row{}, fmt.Errorf("-row: round %q: %w", parts[2], err)
	}
	return Row{Case: parts[0], Server: parts[1], Round: round, Calls: -1}, nil
}

func appendRow(path string, r Row) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\t%s\t%d\t%.1f\t%.3f\t%d\t%d\n", r.Case, r.Server, r.Round, r.RPS, r.P99, r.Calls, r.Errors)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readRows(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []Row
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r Row
		_, err := fmt.Sscanf(sc.Text(), "%s\t%s\t%d\t%g\t%g\t%d\t%d", &r.Case, &r.Server, &r.Round, &r.RPS, &r.P99, &r.Calls, &r.Errors)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// quantile is the nearest-rank quantile of sorted, non-empty xs.
func quantile(xs []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
