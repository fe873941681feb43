package config

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// referenceQueue is DefaultQueue() written out literally, so that a
// changed default fails a test.
func referenceQueue() Queue {
	return Queue{
		Concurrency:     4,
		PerHostInflight: 2,
		RateLimit:       QueueRateLimit{Tokens: 10, RefillPerSecond: 5},
		Retry: QueueRetry{
			MaxAttempts: 6, Base: Duration(500 * time.Millisecond), Cap: Duration(30 * time.Second),
			Jitter: "full", RespectRetryAfter: true,
		},
		VisibilityTimeout: Duration(120 * time.Second),
		DeadLetterAfter:   6,
		Retention:         Duration(24 * time.Hour),
		MaxJobs:           10000,
		MaxBytes:          268435456,
		ResponseBodyLimit: 65536,
	}
}

// fullQueueYAML sets every queue key to a value other than its default.
const fullQueueYAML = `
queue:
  concurrency: 8
  per_host_inflight: 3
  rate_limit: {tokens: 20, refill_per_second: 2.5}
  retry: {max_attempts: 10, base: 1s, cap: 1m, jitter: 0.4, respect_retry_after: false}
  visibility_timeout: 5m
  dead_letter_after: 8
  retention: 48h
  max_jobs: 500
  max_bytes: 1GiB
  response_body_limit: 0
`

func TestQueueDefaultsWhenSectionAbsent(t *testing.T) {
	c := mustParse(t, oneRoute(""))
	if !reflect.DeepEqual(c.Queue, referenceQueue()) {
		t.Fatalf("queue =\n%+v\nwant\n%+v", c.Queue, referenceQueue())
	}
	if !c.Queue.Retry.RespectsRetryAfter() {
		t.Error("RespectsRetryAfter = false, want the default true")
	}
	if f, err := c.Queue.Retry.Jitter.Fraction(); err != nil || f != 1 {
		t.Errorf("jitter fraction = %v, %v; want full (1)", f, err)
	}
	if q := c.Routes[0].Queue; q != RouteQueueOnRequest {
		t.Errorf("route queue = %q, want %q", q, RouteQueueOnRequest)
	}
}

func TestQueueSectionParsedAsWritten(t *testing.T) {
	want := Queue{
		Concurrency:     8,
		PerHostInflight: 3,
		RateLimit:       QueueRateLimit{Tokens: 20, RefillPerSecond: 2.5},
		Retry: QueueRetry{
			MaxAttempts: 10, Base: Duration(time.Second), Cap: Duration(time.Minute),
			Jitter: "0.4", RespectRetryAfter: false,
		},
		VisibilityTimeout: Duration(5 * time.Minute),
		DeadLetterAfter:   8,
		Retention:         Duration(48 * time.Hour),
		MaxJobs:           500,
		MaxBytes:          1 << 30,
		ResponseBodyLimit: 0,
	}
	c := mustParse(t, fullQueueYAML+oneRoute(""))
	if !reflect.DeepEqual(c.Queue, want) {
		t.Fatalf("queue =\n%+v\nwant\n%+v", c.Queue, want)
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if back := mustParse(t, string(out)); !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the config:\n%s", out)
	}
}

func TestQueuePartialSectionKeepsOtherDefaults(t *testing.T) {
	c := mustParse(t, "queue: {concurrency: 16, retry: {cap: 1m}}\n"+oneRoute(""))
	want := referenceQueue()
	want.Concurrency = 16
	want.Retry.Cap = Duration(time.Minute)
	if !reflect.DeepEqual(c.Queue, want) {
		t.Fatalf("queue =\n%+v\nwant\n%+v", c.Queue, want)
	}
}

func TestQueueRespectRetryAfterFalseHonoured(t *testing.T) {
	r := mustParse(t, "queue: {retry: {respect_retry_after: false}}\n"+oneRoute("")).Queue.Retry
	if r.RespectRetryAfter || r.RespectsRetryAfter() {
		t.Fatal("respect_retry_after: false was not honoured")
	}
	want := referenceQueue().Retry
	want.RespectRetryAfter = false
	if r != want {
		t.Fatalf("retry = %+v, want the other defaults kept: %+v", r, want)
	}
}

func TestQueueRetryBackoffIsTheSchedule(t *testing.T) {
	want := Backoff{Base: Duration(500 * time.Millisecond), Cap: Duration(30 * time.Second), Jitter: JitterFull}
	if got := DefaultQueue().Retry.Backoff(); got != want {
		t.Fatalf("Backoff() = %+v, want %+v", got, want)
	}
}

// TestQueueValidate checks every queue rule at its bounds: the last value
// allowed passes, the first beyond is refused naming its key.
func TestQueueValidate(t *testing.T) {
	nan := math.NaN()
	tests := []validateCase{
		{name: "defaults are valid", mutate: func(*Config) {}},

		{name: "concurrency 1024 allowed", mutate: func(c *Config) { c.Queue.Concurrency = 1024 }},
		{name: "concurrency 0 refused", mutate: func(c *Config) { c.Queue.Concurrency = 0 }, want: "queue.concurrency: must be in [1, 1024]"},
		{name: "concurrency 1025 refused", mutate: func(c *Config) { c.Queue.Concurrency = 1025 }, want: "queue.concurrency: must be in [1, 1024]"},
		{name: "per_host_inflight 1024 allowed", mutate: func(c *Config) { c.Queue.PerHostInflight = 1024 }},
		{name: "per_host_inflight 0 refused", mutate: func(c *Config) { c.Queue.PerHostInflight = 0 }, want: "queue.per_host_inflight: must be in [1, 1024]"},
		{name: "per_host_inflight 1025 refused", mutate: func(c *Config) { c.Queue.PerHostInflight = 1025 }, want: "queue.per_host_inflight: must be in [1, 1024]"},

		{name: "one token allowed", mutate: func(c *Config) { c.Queue.RateLimit.Tokens = 1 }},
		{name: "zero tokens refused", mutate: func(c *Config) { c.Queue.RateLimit.Tokens = 0 }, want: "queue.rate_limit.tokens: must be >= 1"},
		{name: "slow refill allowed", mutate: func(c *Config) { c.Queue.RateLimit.RefillPerSecond = 0.01 }},
		{name: "zero refill refused", mutate: func(c *Config) { c.Queue.RateLimit.RefillPerSecond = 0 }, want: "queue.rate_limit.refill_per_second: must be a finite number > 0"},
		{name: "negative refill refused", mutate: func(c *Config) { c.Queue.RateLimit.RefillPerSecond = -1 }, want: "queue.rate_limit.refill_per_second: must be a finite number > 0"},
		{name: "NaN refill refused", mutate: func(c *Config) { c.Queue.RateLimit.RefillPerSecond = nan }, want: "queue.rate_limit.refill_per_second: must be a finite number > 0"},
		{name: "infinite refill refused", mutate: func(c *Config) { c.Queue.RateLimit.RefillPerSecond = math.Inf(1) }, want: "queue.rate_limit.refill_per_second: must be a finite number > 0"},

		{name: "max_attempts 100 allowed", mutate: func(c *Config) { c.Queue.Retry.MaxAttempts = 100 }},
		{name: "max_attempts 0 refused", mutate: func(c *Config) { c.Queue.Retry.MaxAttempts = 0 }, want: "queue.retry.max_attempts: must be in [1, 100]"},
		{name: "max_attempts 101 refused", mutate: func(c *Config) { c.Queue.Retry.MaxAttempts = 101 }, want: "queue.retry.max_attempts: must be in [1, 100]"},
		{name: "zero base refused", mutate: func(c *Config) { c.Queue.Retry.Base = 0 }, want: "queue.retry.base: must be > 0"},
		{name: "cap equal to base allowed", mutate: func(c *Config) { c.Queue.Retry.Cap = c.Queue.Retry.Base }},
		{name: "cap below base refused", mutate: func(c *Config) { c.Queue.Retry.Cap = Duration(100 * time.Millisecond) },
			want: "queue.retry.cap: 100ms must be >= queue.retry.base (500ms)"},
		{name: "bad jitter refused", mutate: func(c *Config) { c.Queue.Retry.Jitter = "1.5" },
			want: `queue.retry.jitter: must be in [0, 1] or one of full, equal, none, not "1.5"`},

		{name: "visibility_timeout 1s allowed", mutate: func(c *Config) { c.Queue.VisibilityTimeout = Duration(time.Second) }},
		{name: "visibility_timeout under 1s refused", mutate: func(c *Config) { c.Queue.VisibilityTimeout = Duration(999 * time.Millisecond) },
			want: "queue.visibility_timeout: must be in [1s, 12h0m0s]"},

		{name: "dead_letter_after 1 allowed", mutate: func(c *Config) { c.Queue.DeadLetterAfter = 1 }},
		{name: "dead_letter_after 0 refused", mutate: func(c *Config) { c.Queue.DeadLetterAfter = 0 }, want: "queue.dead_letter_after: must be >= 1"},
		{name: "dead_letter_after over max_attempts refused", mutate: func(c *Config) { c.Queue.DeadLetterAfter = 7 },
			want: "queue.dead_letter_after: 7 must be at most queue.retry.max_attempts (6)"},
		{name: "dead_letter_after follows a raised max_attempts", mutate: func(c *Config) { c.Queue.Retry.MaxAttempts, c.Queue.DeadLetterAfter = 10, 10 }},

		{name: "retention 1m allowed", mutate: func(c *Config) { c.Queue.Retention = Duration(time.Minute) }},
		{name: "retention under 1m refused", mutate: func(c *Config) { c.Queue.Retention = Duration(59 * time.Second) }, want: "queue.retention: must be >= 1m"},

		{name: "max_jobs 1000000 allowed", mutate: func(c *Config) { c.Queue.MaxJobs = 1_000_000 }},
		{name: "max_jobs 0 refused", mutate: func(c *Config) { c.Queue.MaxJobs = 0 }, want: "queue.max_jobs: must be in [1, 1000000]"},
		{name: "max_jobs 1000001 refused", mutate: func(c *Config) { c.Queue.MaxJobs = 1_000_001 }, want: "queue.max_jobs: must be in [1, 1000000]"},

		{name: "max_bytes 1MiB allowed", mutate: func(c *Config) { c.Queue.MaxBytes = 1 << 20 }},
		{name: "max_bytes under 1MiB refused", mutate: func(c *Config) { c.Queue.MaxBytes = 1<<20 - 1 }, want: "queue.max_bytes: must be >= 1MiB"},

		{name: "response_body_limit 0 allowed", mutate: func(c *Config) { c.Queue.ResponseBodyLimit = 0 }},
		{name: "response_body_limit 1MiB allowed", mutate: func(c *Config) { c.Queue.ResponseBodyLimit = 1 << 20 }},
		{name: "negative response_body_limit refused", mutate: func(c *Config) { c.Queue.ResponseBodyLimit = -1 }, want: "queue.response_body_limit: must be in [0, 1MiB]"},
		{name: "response_body_limit over 1MiB refused", mutate: func(c *Config) { c.Queue.ResponseBodyLimit = 1<<20 + 1 }, want: "queue.response_body_limit: must be in [0, 1MiB]"},

		{name: "route queue always with raft allowed", mutate: func(c *Config) {
			c.Node.Raft, c.Cluster.Secret = "127.0.0.1:0", testSecret
			c.Routes[0].Queue = RouteQueueAlways
		}},
		{name: "route queue always on a single node without raft allowed", mutate: func(c *Config) { c.Routes[0].Queue = RouteQueueAlways }},
		{name: "route queue value unknown refused", mutate: func(c *Config) { c.Routes[0].Queue = "async" },
			want: `routes[0].queue: "async" must be "" (queue on Prefer: respond-async) or "always"`},
	}
	checkValidate(t, tests)
}

// TestQueueParseInvalid checks that the file's queue keys are refused
// with their path: unknown keys at every depth, undecodable values, the
// rules, and a route's queue key.
func TestQueueParseInvalid(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{name: "unknown queue key", src: "queue: {concurency: 4}\n" + oneRoute(""), want: "queue.concurency: unknown key"},
		{name: "unknown rate_limit key", src: "queue: {rate_limit: {rate: 1}}\n" + oneRoute(""), want: "queue.rate_limit.rate: unknown key"},
		{name: "unknown retry key", src: "queue: {retry: {backoff: {base: 1s}}}\n" + oneRoute(""), want: "queue.retry.backoff: unknown key"},
		{name: "queue not a mapping", src: "queue: always\n" + oneRoute(""), want: "queue: must be a mapping"},
		{name: "bad size", src: "queue: {max_bytes: lots}\n" + oneRoute(""), want: `queue.max_bytes: invalid size "lots"`},
		{name: "bare number duration", src: "queue: {retention: 86400}\n" + oneRoute(""), want: `queue.retention: invalid duration "86400"`},
		{name: "NaN refill", src: "queue: {rate_limit: {refill_per_second: .nan}}\n" + oneRoute(""), want: "queue.rate_limit.refill_per_second: invalid number"},
		{name: "bad bool", src: "queue: {retry: {respect_retry_after: maybe}}\n" + oneRoute(""), want: `queue.retry.respect_retry_after: invalid boolean "maybe"`},
		{name: "bad jitter", src: "queue: {retry: {jitter: fulll}}\n" + oneRoute(""),
			want: `queue.retry.jitter: must be in [0, 1] or one of full, equal, none, not "fulll"`},
		{name: "rule refused", src: "queue: {retry: {max_attempts: 3}}\n" + oneRoute(""),
			want: "queue.dead_letter_after: 6 must be at most queue.retry.max_attempts (3)"},
		{name: "route queue other value", src: oneRoute("queue: Always"),
			want: `routes[0].queue: "Always" must be "" (queue on Prefer: respond-async) or "always"`},
		{name: "route queue not a scalar", src: oneRoute("queue: {mode: always}"), want: "routes[0].queue: must be a single value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse = %v, want an ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}

// TestRouteQueueAlwaysParsedWithAndWithoutRaft: a single node keeps its
// own queue log, so queue: always needs neither node.raft nor a secret.
func TestRouteQueueAlwaysParsedWithAndWithoutRaft(t *testing.T) {
	for name, src := range map[string]string{
		"with raft":            "node: {raft: '127.0.0.1:0'}\ncluster: {secret: " + testSecret + "}\n" + oneRoute("queue: always"),
		"single node, no raft": oneRoute("queue: always"),
	} {
		if got := mustParse(t, src).Routes[0].Queue; got != RouteQueueAlways {
			t.Errorf("%s: route queue = %q, want %q", name, got, RouteQueueAlways)
		}
	}
}
