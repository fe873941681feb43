package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/levee/levee/jepsen-lite/history"
)

// Job states the queue checker reads in the drain's answers.
const (
	jobDone = "done"
	jobDead = "dead"
)

// levKeyPrefix is the Idempotency-Key Levee gives a job whose client sent
// none: "levee-" and the job's id.
const levKeyPrefix = "levee-"

// acceptedJob is one job a node answered 202 for: the first such answer.
type acceptedJob struct {
	history.Enqueue
	final *history.JobStatus // the drain's answer showing it done or dead; nil if none
	views []history.JobStatus
}

// deliveryKey is the Idempotency-Key every upstream attempt of j carries.
func (j *acceptedJob) deliveryKey() tenantKey {
	if j.Key != "" {
		return tenantKey{j.Tenant, j.Key}
	}
	return tenantKey{j.Tenant, levKeyPrefix + j.ID}
}

// queueRun is what the queue checker derives from a history.
type queueRun struct {
	jobs       map[string]*acceptedJob
	order      []string                             // job ids, in acceptance order
	deliveries map[tenantKey][]history.UpstreamCall // by (tenant, Idempotency-Key), in time order
}

// Queue checks the durable job queue from the clients' side and the
// upstream's. Every job a node accepted (202) must be done or dead once
// the harness has drained the queue (lost = accepted − (done ∪ dead)); a
// client Idempotency-Key sent twice must name one job; and a job Levee
// calls done must have reached the upstream with a 2xx answer. Deliveries
// are counted per Idempotency-Key from the upstream's call log: a 2xx
// delivery beyond a job's first is a duplicate — by design when the node
// delivering it died (its lease runs out and the next leader delivers it
// again) — counted, never judged.
func Queue(h *History, cfg Config) Result {
	b := newResult("queue", cfg)
	q := newQueueRun(h)
	enqueueFigures(b, h.Enqueues, q)
	sameKeySameJob(b, h.Enqueues)
	q.judgeFinished(b, len(h.JobStates) > 0, boundsOf(h.Meta))
	q.judgeDeliveries(b)
	if v := h.Meta.Routes.QueueVisibilityTimeout; v > 0 {
		b.fig("visibility timeout", "%v", v)
	}
	return b.done()
}

func newQueueRun(h *History) *queueRun {
	q := &queueRun{jobs: map[string]*acceptedJob{}, deliveries: map[tenantKey][]history.UpstreamCall{}}
	es := append([]history.Enqueue(nil), h.Enqueues...)
	sort.SliceStable(es, func(i, j int) bool { return es[i].Time < es[j].Time })
	for _, e := range es {
		if e.Type == history.OK && q.jobs[e.ID] == nil {
			q.jobs[e.ID] = &acceptedJob{Enqueue: e}
			q.order = append(q.order, e.ID)
		}
	}
	for _, s := range h.JobStates {
		j := q.jobs[s.ID]
		if j == nil {
			continue
		}
		j.views = append(j.views, s)
		if j.final == nil && s.Status == 200 && (s.State == jobDone || s.State == jobDead) {
			j.final = &s
		}
	}
	for _, c := range sortedCalls(h.Upstream) {
		if c.IdempotencyKey != "" {
			k := tenantKey{c.Tenant, c.IdempotencyKey}
			q.deliveries[k] = append(q.deliveries[k], c)
		}
	}
	return q
}

// enqueueFigures counts what the enqueues were answered.
func enqueueFigures(b *result, es []history.Enqueue, q *queueRun) {
	var accepted, refused503, otherFail, info, repeats int
	for _, e := range es {
		switch {
		case e.Type == history.OK:
			accepted++
		case e.Type == history.Fail && e.Status == 503:
			refused503++
		case e.Type == history.Fail:
			otherFail++
		default:
			info++
		}
		if e.Repeat {
			repeats++
		}
	}
	b.fig("enqueues sent", "%d (%d of them a client key sent again)", len(es), repeats)
	b.fig("accepted (202)", "%d answers, %d jobs", accepted, len(q.jobs))
	b.fig("refused", "%d with 503, %d otherwise; %d without an answer", refused503, otherFail, info)
}

// sameKeySameJob: every 202 for one client key (and tenant) names one job.
func sameKeySameJob(b *result, es []history.Enqueue) {
	first := map[tenantKey]history.Enqueue{}
	sentTwice, bothAccepted := map[tenantKey]bool{}, 0
	for _, e := range es {
		if e.Repeat {
			sentTwice[tenantKey{e.Tenant, e.Key}] = true
		}
	}
	for _, e := range sortedEnqueues(es) {
		if e.Key == "" || e.Type != history.OK {
			continue
		}
		k := tenantKey{e.Tenant, e.Key}
		f, ok := first[k]
		if !ok {
			first[k] = e
			continue
		}
		if sentTwice[k] {
			bothAccepted++
		}
		if f.ID != e.ID {
			b.violate(e.Time, "client Idempotency-Key %q (tenant %s) named two jobs: %s from %s at %s, %s from %s at %s",
				e.Key, e.Tenant, f.ID, f.Node, secs(f.Time), e.ID, e.Node, secs(e.Time))
		}
	}
	b.fig("client keys sent twice", "%d (both sends accepted: %d)", len(sentTwice), bothAccepted)
}

func sortedEnqueues(es []history.Enqueue) []history.Enqueue {
	out := append([]history.Enqueue(nil), es...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
}

// judgeFinished: every accepted job ended done or dead. A job no node
// could read after the drain counts as finished when the queue could
// have removed it as such (gone: compacted after qb's retention, or
// evicted at its max_jobs), and as lost otherwise.
func (q *queueRun) judgeFinished(b *result, drained bool, qb queueBounds) {
	var done, dead, lost, adminOnly int
	removed := map[string]int{}
	for _, id := range q.order {
		j := q.jobs[id]
		switch {
		case j.final == nil:
			why, detail := q.gone(j, qb)
			if why != goneNot {
				removed[why]++
				continue
			}
			if detail != "" {
				detail += "; "
			}
			lost++
			b.violate(j.Time, "job %s (%s, tenant %s, accepted by %s at %s) is neither done nor dead after the drain: %s%s",
				j.ID, describeKey(j), j.Tenant, j.Node, secs(j.Time), detail, describeJobViews(j.views))
			continue
		case j.final.State == jobDone:
			done++
		default:
			dead++
		}
		if j.final.AdminOnly {
			adminOnly++
		}
	}
	b.fig("after the drain", "%d done, %d dead, %d lost", done, dead, lost)
	b.fig("finished, then removed before the drain", "%d %s, %d %s, %d %s (queue.retention %v, queue.max_jobs %d)",
		removed[goneDoneExpired], goneDoneExpired, removed[goneDoneEvicted], goneDoneEvicted,
		removed[goneDeadExpired], goneDeadExpired, qb.retention, qb.maxJobs)
	if !drained && len(q.jobs) > 0 {
		b.fig("drain", "not recorded: every accepted job counts as lost")
	}
	b.fig("readable only with the admin token", "%d", adminOnly)
}

func describeKey(j *acceptedJob) string {
	if j.Key == "" {
		return "no client key"
	}
	return fmt.Sprintf("client key %q", j.Key)
}

// describeJobViews says what each node last answered about a job.
func describeJobViews(vs []history.JobStatus) string {
	if len(vs) == 0 {
		return "never read back"
	}
	last := map[string]history.JobStatus{}
	var nodes []string
	for _, v := range vs {
		if _, ok := last[v.Node]; !ok {
			nodes = append(nodes, v.Node)
		}
		last[v.Node] = v
	}
	sort.Strings(nodes)
	var parts []string
	for _, n := range nodes {
		v := last[n]
		switch {
		case v.Status == 0:
			parts = append(parts, fmt.Sprintf("%s no answer (%s)", n, v.Error))
		case v.Status != 200:
			parts = append(parts, fmt.Sprintf("%s %d", n, v.Status))
		default:
			parts = append(parts, fmt.Sprintf("%s %s after %d attempts (%s)", n, v.State, v.Attempts, orNone(v.LastError)))
		}
	}
	return strings.Join(parts, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "no error"
	}
	return s
}

// judgeDeliveries counts the upstream's deliveries per job and holds
// every done job to one 2xx delivery at least. Not judged when the call
// log carries no Idempotency-Key at all (an upstream that did not record
// them).
func (q *queueRun) judgeDeliveries(b *result) {
	logged := len(q.deliveries) > 0
	var total, delivered, accepted, duplicates, duplicated, repeats, deadAccepted int
	known := map[tenantKey]bool{}
	for _, id := range q.order {
		j := q.jobs[id]
		k := j.deliveryKey()
		known[k] = true
		ds := q.deliveries[k]
		ok := okDeliveries(ds)
		total += len(ds)
		repeats += max(0, len(ds)-1)
		if len(ds) > 0 {
			delivered++
		}
		if ok > 0 {
			accepted++
		}
		if ok > 1 {
			duplicates += ok - 1
			duplicated++
		}
		if j.final == nil {
			continue
		}
		if j.final.State == jobDead && ok > 0 {
			deadAccepted++
		}
		if logged && j.final.State == jobDone && ok == 0 {
			b.violate(j.final.Time, "job %s (%s, tenant %s) is done (upstream status %d kept) but the upstream logged no 2xx delivery with key %s (%d deliveries)",
				j.ID, describeKey(j), j.Tenant, j.final.Response, k.key, len(ds))
		}
	}
	if !logged {
		b.fig("deliveries", "not judged: the upstream's call log has no Idempotency-Key")
		return
	}
	b.fig("deliveries", "%d upstream calls for %d of %d jobs (%d jobs accepted by the upstream)", total, delivered, len(q.jobs), accepted)
	b.fig("attempts beyond a job's first", "%d (retries and redeliveries)", repeats)
	b.fig("duplicates (2xx deliveries beyond a job's first, allowed)", "%d, of %d jobs", duplicates, duplicated)
	b.fig("redelivery rate", "%s", rate(duplicated, accepted))
	b.fig("dead jobs the upstream had accepted", "%d", deadAccepted)
	unknownCalls, unknownKeys := 0, 0
	for k, ds := range q.deliveries {
		if !known[k] {
			unknownKeys++
			unknownCalls += len(ds)
		}
	}
	b.fig("deliveries of jobs never acknowledged (refused or unanswered enqueues)", "%d calls, %d keys", unknownCalls, unknownKeys)
}

// okDeliveries counts the calls the upstream answered 2xx.
func okDeliveries(ds []history.UpstreamCall) int {
	n := 0
	for _, c := range ds {
		if c.Status >= 200 && c.Status < 300 {
			n++
		}
	}
	return n
}

// rate formats num/den as a percentage of jobs.
func rate(num, den int) string {
	if den == 0 {
		return "n/a (0 jobs)"
	}
	return fmt.Sprintf("%.2f%% (%d/%d jobs)", 100*float64(num)/float64(den), num, den)
}
