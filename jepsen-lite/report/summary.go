package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/levee/levee/jepsen-lite/checker"
)

// Summary writes the checker table: checker, PASS/FAIL, figures, then the
// listed violations of every failed checker.
func Summary(w io.Writer, rs []checker.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECKER\tRESULT\tFIGURES")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, verdict(r.Pass), figures(r.Figures))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Pass {
			continue
		}
		fmt.Fprintf(w, "\n%s: %d violation(s), first %d:\n", r.Name, r.Total, len(r.Violations))
		for _, v := range r.Violations {
			fmt.Fprintf(w, "  at %8.2fs  %s\n", time.Duration(v.Time).Seconds(), v.What)
		}
	}
	return nil
}

func verdict(pass bool) string {
	if pass {
		return "PASS"
	}
	return "FAIL"
}

func figures(fs []checker.Figure) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		parts = append(parts, f.Key+"="+f.Value)
	}
	return strings.Join(parts, "; ")
}
