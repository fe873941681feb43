package config

import "time"

// Queue configures the durable job queue: writes accepted at once and
// delivered to the upstream later, committed through the cluster's Raft
// log so that a job outlives the node that took it (on a node without
// node.raft, a log of its own fsynced in node.data_dir, so that a job
// outlives the node's restart). A write is queued when
// the client sends Prefer: respond-async, or always on a route whose Queue
// is RouteQueueAlways.
type Queue struct {
	// Concurrency is how many workers deliver jobs on the node that
	// delivers them. Default 4; in [1, 1024].
	Concurrency int `yaml:"concurrency"`
	// PerHostInflight caps the jobs in flight to one upstream host at
	// once. Default 2; in [1, 1024].
	PerHostInflight int `yaml:"per_host_inflight"`
	// RateLimit is the token bucket each upstream host's deliveries take
	// from, for the whole cluster.
	RateLimit QueueRateLimit `yaml:"rate_limit"`
	// Retry sets how a delivery that failed in a retryable way is retried.
	Retry QueueRetry `yaml:"retry"`
	// VisibilityTimeout is how long a job handed to a worker stays its
	// own: a job whose worker or node died is handed out again after it.
	// Default 120s; in [1s, queue.MaxVisibility] (12h).
	VisibilityTimeout Duration `yaml:"visibility_timeout"`
	// DeadLetterAfter is the number of attempts after which a retryable
	// failure dead-letters the job instead of retrying it. Default 6; in
	// [1, Retry.MaxAttempts].
	DeadLetterAfter int `yaml:"dead_letter_after"`
	// Retention is how long done and dead jobs are kept before they are
	// compacted out. Default 24h; >= 1m.
	Retention Duration `yaml:"retention"`
	// MaxJobs caps the jobs held, in any state. An enqueue into a full
	// queue evicts its oldest done jobs, else (none to evict) is answered
	// 503. Default 10000; in [1, queue.MaxJobs] (1000000).
	MaxJobs int `yaml:"max_jobs"`
	// MaxBytes caps the request bodies and stored responses held, as
	// MaxJobs caps jobs; one job larger than it is answered 413. Default
	// 256MiB; >= 1MiB.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// ResponseBodyLimit is the most of the upstream's answer body a done
	// job keeps; the rest is dropped. Default 64KiB; in [0, 1MiB], 0
	// keeping no body.
	ResponseBodyLimit ByteSize `yaml:"response_body_limit"`
}

// QueueRateLimit is a token bucket per upstream host, shared by the whole
// cluster.
type QueueRateLimit struct {
	// Tokens is the bucket's size: deliveries that may start at once.
	// Default 10; >= 1.
	Tokens int `yaml:"tokens"`
	// RefillPerSecond is how many tokens return each second. Default 5;
	// a finite number > 0.
	RefillPerSecond float64 `yaml:"refill_per_second"`
}

// QueueRetry sets how the queue retries a delivery: an exponential backoff
// as Backoff describes, which a Retry-After from the upstream outranks
// unless RespectRetryAfter is false. Its keys sit in one block, not under
// a nested backoff key, hence a struct of its own; Backoff returns the
// schedule.
type QueueRetry struct {
	// MaxAttempts caps the deliveries of one job, the first included.
	// Default 6; in [1, 100].
	MaxAttempts int `yaml:"max_attempts"`
	// Base is the first backoff ceiling. Default 500ms; > 0.
	Base Duration `yaml:"base"`
	// Cap bounds every ceiling. Default 30s; in [Base, queue.MaxDelay]
	// (24h).
	Cap Duration `yaml:"cap"`
	// Jitter is how far below its ceiling a wait is drawn: full, equal,
	// none or a number in [0, 1] (see Jitter). Default full.
	Jitter Jitter `yaml:"jitter"`
	// RespectRetryAfter makes a Retry-After from the upstream set the
	// wait before the next attempt instead of the backoff. Default true;
	// false keeps to the backoff. Like cache.persist it is a plain bool
	// whose default DefaultQueue sets: a file that omits the key keeps it.
	RespectRetryAfter bool `yaml:"respect_retry_after"`
}

// Backoff returns the retry schedule: Base, Cap and Jitter.
func (r QueueRetry) Backoff() Backoff {
	return Backoff{Base: r.Base, Cap: r.Cap, Jitter: r.Jitter}
}

// RespectsRetryAfter reports whether an upstream's Retry-After sets the
// wait before the next attempt.
func (r QueueRetry) RespectsRetryAfter() bool { return r.RespectRetryAfter }

// The values a route's queue key takes.
const (
	// RouteQueueOnRequest, the default, queues a write only when the
	// client sends Prefer: respond-async.
	RouteQueueOnRequest = ""
	// RouteQueueAlways queues every POST, PUT, PATCH and DELETE on the
	// route.
	RouteQueueAlways = "always"
)

// DefaultQueue returns the queue's defaults.
func DefaultQueue() Queue {
	return Queue{
		Concurrency:     4,
		PerHostInflight: 2,
		RateLimit:       QueueRateLimit{Tokens: 10, RefillPerSecond: 5},
		Retry: QueueRetry{
			MaxAttempts:       6,
			Base:              Duration(500 * time.Millisecond),
			Cap:               Duration(30 * time.Second),
			Jitter:            JitterFull,
			RespectRetryAfter: true,
		},
		VisibilityTimeout: Duration(120 * time.Second),
		DeadLetterAfter:   6,
		Retention:         Duration(24 * time.Hour),
		MaxJobs:           10_000,
		MaxBytes:          256 << 20,
		ResponseBodyLimit: 64 << 10,
	}
}
