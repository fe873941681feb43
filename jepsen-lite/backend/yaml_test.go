package backend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee/levee/config"
)

// TestQueueSectionWritesOnlyWhatIsSet: each queue key the routes leave 0
// is left out, so the node keeps the product default; a soak's retention
// and job cap reach the config as set.
func TestQueueSectionWritesOnlyWhatIsSet(t *testing.T) {
	def := config.DefaultQueue()
	cases := []struct {
		name       string
		set        func(*Routes)
		visibility time.Duration
		retention  time.Duration
		maxJobs    int
	}{
		{"the chaos run's: visibility 5s, the rest default", func(*Routes) {}, 5 * time.Second, def.Retention.D(), def.MaxJobs},
		{"nothing set: every default", func(r *Routes) { r.QueueVisibilityTimeout = 0 }, def.VisibilityTimeout.D(), def.Retention.D(), def.MaxJobs},
		{"a soak's retention", func(r *Routes) { r.QueueRetention = 5 * time.Minute }, 5 * time.Second, 5 * time.Minute, def.MaxJobs},
		{"a job cap alone", func(r *Routes) { r.QueueVisibilityTimeout, r.QueueMaxJobs = 0, 500 }, def.VisibilityTimeout.D(), def.Retention.D(), 500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := DefaultRoutes()
			tc.set(&r)
			data, err := localNodeYAML(testConfig(3), r, 1, "/tmp/x/n1")
			if err != nil {
				t.Fatal(err)
			}
			c, err := config.Parse(data)
			if err != nil {
				t.Fatalf("generated config does not validate: %v\n%s", err, data)
			}
			checkEq(t, "queue.visibility_timeout", c.Queue.VisibilityTimeout.D(), tc.visibility)
			checkEq(t, "queue.retention", c.Queue.Retention.D(), tc.retention)
			checkEq(t, "queue.max_jobs", c.Queue.MaxJobs, tc.maxJobs)
		})
	}
}

// TestNewLocalRefusesRoutesTheNodesWouldRefuse: a queue setting outside
// the config's bounds is refused before any namespace exists, with the
// key named; one inside them is taken.
func TestNewLocalRefusesRoutesTheNodesWouldRefuse(t *testing.T) {
	cases := []struct {
		name string
		set  func(*Routes)
		want string // "" = accepted
	}{
		{"the soak's retention", func(r *Routes) { r.QueueRetention = 5 * time.Minute }, ""},
		{"retention at its least", func(r *Routes) { r.QueueRetention = time.Minute }, ""},
		{"retention below a minute", func(r *Routes) { r.QueueRetention = 30 * time.Second }, "queue.retention"},
		{"a job cap past the queue's bound", func(r *Routes) { r.QueueMaxJobs = 2_000_000 }, "queue.max_jobs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := DefaultRoutes()
			tc.set(&r)
			cfg := testConfig(3)
			cfg.Dir = t.TempDir()
			cfg.Bin, cfg.Demo = filepath.Join(cfg.Dir, "levee"), filepath.Join(cfg.Dir, "demo-upstream")
			for _, f := range []string{cfg.Bin, cfg.Demo} {
				if err := os.WriteFile(f, nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, err := NewLocal(cfg, r)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}
