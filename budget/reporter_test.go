package budget

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReporterReportsEachSecondAndRenewsItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := NewTable()
		var mu sync.Mutex
		var reports []Report
		fail := false
		r := &Reporter{Node: "n1", Committed: tab, Members: func() int { return 3 },
			Submit: func(_ context.Context, b []byte) ([]byte, error) {
				mu.Lock()
				defer mu.Unlock()
				if fail {
					return nil, errors.New("no quorum")
				}
				rep, err := DecodeReport(b)
				if err != nil {
					return nil, err
				}
				reports = append(reports, rep)
				tab.Apply(rep)
				return nil, nil
			}}
		if _, ok := r.Lease(apiHost); ok {
			t.Fatal("a lease before any report")
		}
		r.Start()
		defer r.Close()
		for range 5 {
			r.Count(apiHost, 1, 1, 0, 30, 3)
		}
		r.Count(apiHost, 2, 0, 1, 30, 3)
		time.Sleep(ReportEvery + time.Millisecond)
		synctest.Wait()
		mu.Lock()
		first := reports[0]
		mu.Unlock()
		if first.Sent != 5 || first.Lost != 1 || first.Wanted != 7 || first.Members != 3 || first.Ceiling != 30 || first.Floor != 3 {
			t.Fatalf("first report %+v, want 5 sent, 1 lost, 7 wanted of 3 members, bounds 3–30", first)
		}
		if rate, ok := r.Lease(apiHost); !ok || rate <= 0 {
			t.Fatalf("lease %v, %v after a report", rate, ok)
		}
		// A quiet second is reported too: the lease is renewed.
		time.Sleep(ReportEvery)
		synctest.Wait()
		if _, running, _ := tab.Lease(apiHost, "n1", time.Now().Add(LeaseTTL-time.Second)); !running {
			t.Fatal("the lease was not renewed by a quiet second's report")
		}
		// Cut off: reports fail, and the lease ends into the safe share.
		mu.Lock()
		fail = true
		mu.Unlock()
		time.Sleep(LeaseTTL + ReportEvery)
		synctest.Wait()
		if rate, ok := r.Lease(apiHost); !ok || rate != 1 {
			t.Fatalf("lease %v (%v) after its end, want the safe share 3/3", rate, ok)
		}
	})
}

// TestAHostsFirstReportCoversTheTimeSinceItsFirstAttempt: attempts that
// began late in a tick are reported at their own rate, not spread over
// the whole tick; one attempt just before the tick claims at most
// 1/minFirstPeriod; later reports cover the tick.
func TestAHostsFirstReportCoversTheTimeSinceItsFirstAttempt(t *testing.T) {
	cases := []struct {
		name       string
		firstAt    time.Duration // into the first tick
		wantPeriod time.Duration
	}{
		{"from the tick's start", 0, ReportEvery},
		{"the last 400 ms", ReportEvery - 400*time.Millisecond, 400 * time.Millisecond},
		{"just before the tick", ReportEvery - time.Millisecond, minFirstPeriod},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var reports []Report
				r := &Reporter{Node: "n1", Committed: NewTable(),
					Submit: func(_ context.Context, b []byte) ([]byte, error) {
						rep, err := DecodeReport(b)
						mu.Lock()
						reports = append(reports, rep)
						mu.Unlock()
						return nil, err
					}}
				r.Start()
				defer r.Close()
				time.Sleep(tc.firstAt)
				r.Count(apiHost, 1, 1, 0, 30, 3)
				time.Sleep(ReportEvery - tc.firstAt + time.Millisecond)
				synctest.Wait()
				r.Count(apiHost, 1, 1, 0, 30, 3)
				time.Sleep(ReportEvery)
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if len(reports) != 2 {
					t.Fatalf("%d reports, want 2", len(reports))
				}
				if got := time.Duration(reports[0].Period); got != tc.wantPeriod {
					t.Errorf("first report's period %v, want %v", got, tc.wantPeriod)
				}
				if got := time.Duration(reports[1].Period); got != ReportEvery {
					t.Errorf("second report's period %v, want the tick's %v", got, ReportEvery)
				}
			})
		})
	}
}
