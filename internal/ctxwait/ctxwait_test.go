package ctxwait

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleepEndsWithTheDelayOrTheContext(t *testing.T) {
	tests := []struct {
		name     string
		cancelIn time.Duration // 0: never
		want     bool
		took     time.Duration
	}{
		{"the delay passes", 0, true, time.Second},
		{"the context ends first", 100 * time.Millisecond, false, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tt.cancelIn > 0 {
					time.AfterFunc(tt.cancelIn, cancel)
				}
				start := time.Now()
				if got := Sleep(ctx, time.Second); got != tt.want {
					t.Fatalf("Sleep = %v, want %v", got, tt.want)
				}
				if took := time.Since(start); took != tt.took {
					t.Fatalf("took %v, want %v", took, tt.took)
				}
			})
		})
	}
}
