package breaker

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the base of command timestamps in tests.
const t0 = int64(1_700_000_000) * int64(time.Second)

// sec returns the unix-ns timestamp n seconds after t0.
func sec(n float64) int64 { return t0 + int64(n*float64(time.Second)) }

const testRoute = "comments"

// fail is an OpFailure with the default settings and MinNodes mn.
func fail(node string, at float64, mn int) Command {
	s := DefaultSettings()
	return Command{
		V: CommandVersion, Op: OpFailure, Route: testRoute, Node: node, At: sec(at),
		Failures: s.Failures, MinNodes: mn, Window: int64(s.Window), OpenFor: int64(s.OpenFor),
	}
}

func acquire(node string, at float64) Command {
	return Command{
		V: CommandVersion, Op: OpProbeAcquire, Route: testRoute, Node: node, At: sec(at),
		Lease: int64(DefaultSettings().ProbeLease),
	}
}

func result(node string, at float64, ok bool) Command {
	return Command{
		V: CommandVersion, Op: OpProbeResult, Route: testRoute, Node: node, At: sec(at),
		OK: ok, OpenFor: int64(DefaultSettings().OpenFor),
	}
}

func force(op Op, at float64) Command {
	return Command{V: CommandVersion, Op: op, Route: testRoute, Node: "admin", At: sec(at)}
}

// mustApply applies c and fails the test on an error.
func mustApply(t testing.TB, tbl *Table, c Command) Result {
	t.Helper()
	res, err := tbl.Apply(c)
	if err != nil {
		t.Fatalf("Apply(%+v): %v", c, err)
	}
	return res
}
