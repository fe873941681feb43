package control

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/levee/levee/config"
	"github.com/levee/levee/consensus"
	"github.com/levee/levee/proxy"
	"github.com/levee/levee/queue"
	"github.com/levee/levee/routecfg"
)

// queueOver is the job queue over log, with the default config's pace.
func queueOver(t *testing.T, log JobLog) *queue.Part {
	t.Helper()
	pace, policy, bounds, err := routecfg.Queue(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	serve := func(context.Context, *proxy.Request) (*proxy.Response, error) {
		return nil, errors.New("not served in this test")
	}
	p, err := log.Queue(queue.RunnerConfig{Node: "n1", Serve: serve, Pace: pace, Policy: policy}, bounds)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestJobLogQueueAnswersByWhatTheLogProves: an enqueue the log proves it
// never took (no leader) is refused at once, nothing promised; one that
// may have reached it (a timeout) is resubmitted and ends unknown, never
// refused; one the log commits is the log's job.
func TestJobLogQueueAnswersByWhatTheLogProves(t *testing.T) {
	tests := []struct {
		name   string
		submit error
		want   error
	}{
		{"no leader: nothing was promised", consensus.ErrNoLeader, queue.ErrUnavailable},
		{"a timeout may still commit", consensus.ErrTimeout, queue.ErrOutcomeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := JobLog{Table: queue.NewTable(), Leading: func() bool { return false },
				Submit: func(context.Context, []byte) ([]byte, error) { return nil, tt.submit }}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			_, err := queueOver(t, log).Service.Enqueue(ctx, queue.Request{Route: "r", Host: "http://up", Method: "POST", Path: "/x"})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Enqueue: %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("committed on a Solo's log", func(t *testing.T) {
		s := newTestSolo(t, t.TempDir())
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "leadership", s.JobLog().Leading)
		res, err := queueOver(t, s.JobLog()).Service.Enqueue(t.Context(), queue.Request{Route: "r", Host: "http://up", Method: "POST", Path: "/x"})
		if err != nil || res.Refused != "" {
			t.Fatalf("Enqueue: %+v, %v", res, err)
		}
		if _, ok := s.Jobs.Job(res.ID); !ok {
			t.Fatalf("job %s is not in the Solo's table", res.ID)
		}
	})
}
