package queue

import (
	"cmp"
	"container/heap"
	"slices"
)

// Ready returns the jobs that may be leased at now, the longest due
// first: at most room(host) of each host's and at most limit in all. The
// runner's room is what a host can take now (none while it is paused or
// its slots or tokens are spent), so a blocked host's backlog, however
// long and however old, hides none of the other hosts' jobs, and within a
// host the longest due still go first. room is asked once per host with
// a job ready, under the table's read lock: it must not call the Table.
//
// The cost is one pass over the jobs: each host keeps only its room's
// earliest in a heap, so a job later than all of them costs one
// comparison, and nothing the runner could not take is sorted or copied.
func (t *Table) Ready(now int64, limit int, room func(host string) int) []Job {
	t.mu.RLock()
	defer t.mu.RUnlock()
	hosts := map[string]*earliest{}
	for _, j := range t.jobs {
		if !ready(j, now) {
			continue
		}
		e, ok := hosts[j.Req.Host]
		if !ok {
			e = &earliest{k: min(room(j.Req.Host), limit)}
			hosts[j.Req.Host] = e
		}
		e.offer(j)
	}
	var due []*Job
	for _, e := range hosts {
		due = append(due, e.jobs...)
	}
	slices.SortFunc(due, readyOrder)
	out := make([]Job, 0, min(limit, len(due)))
	for _, j := range due[:min(limit, len(due))] {
		out = append(out, j.clone())
	}
	return out
}

// readyOrder is the order jobs go out in: the longest due first, then the
// oldest, then by id, so that it is total.
func readyOrder(a, b *Job) int {
	return cmp.Or(cmp.Compare(dueAt(a), dueAt(b)), cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

func dueAt(j *Job) int64 {
	if j.State == Running {
		return j.LeaseUntil
	}
	return j.NextAt
}

// earliest keeps the k first jobs in readyOrder of those offered: a heap
// with the last of them on top.
type earliest struct {
	k    int
	jobs []*Job
}

func (e *earliest) offer(j *Job) {
	switch {
	case len(e.jobs) < e.k:
		heap.Push(e, j)
	case e.k > 0 && readyOrder(j, e.jobs[0]) < 0:
		e.jobs[0] = j
		heap.Fix(e, 0)
	}
}

func (e *earliest) Len() int           { return len(e.jobs) }
func (e *earliest) Less(a, b int) bool { return readyOrder(e.jobs[a], e.jobs[b]) > 0 }
func (e *earliest) Swap(a, b int)      { e.jobs[a], e.jobs[b] = e.jobs[b], e.jobs[a] }
func (e *earliest) Push(x any)         { e.jobs = append(e.jobs, x.(*Job)) }
func (e *earliest) Pop() any {
	j := e.jobs[len(e.jobs)-1]
	e.jobs = e.jobs[:len(e.jobs)-1]
	return j
}
