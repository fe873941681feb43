package queue

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadSnapshot wraps every error from Table.Restore.
var ErrBadSnapshot = errors.New("queue: bad snapshot")

type snapshot struct {
	V    uint8   `msgpack:"v"`
	Jobs jobList `msgpack:"jobs"`
}

// jobList decodes itself job by job: msgpack's reflection decoder
// preallocates a slice of the length the input claims, so a few garbage
// bytes could otherwise demand terabytes (as breaker's recordList).
type jobList []Job

// DecodeMsgpack implements msgpack.CustomDecoder, bounded by MaxJobs.
func (l *jobList) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeArrayLen()
	if err != nil || n <= 0 {
		*l = nil
		return err
	}
	if n > MaxJobs {
		return fmt.Errorf("%d jobs, at most %d", n, MaxJobs)
	}
	out := make(jobList, 0, min(n, 64))
	for range n {
		var j Job
		if err := d.Decode(&j); err != nil {
			return err
		}
		out = append(out, j)
	}
	*l = out
	return nil
}

// Snapshot encodes the table, jobs in id order, so equal tables give equal
// bytes. With no job it is empty: a consensus.Mux then keeps the format of
// a log without a queue.
func (t *Table) Snapshot() ([]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.jobs) == 0 {
		return nil, nil
	}
	s := struct {
		V    uint8                `msgpack:"v"`
		Jobs []msgpack.RawMessage `msgpack:"jobs"`
	}{V: CommandVersion, Jobs: make([]msgpack.RawMessage, 0, len(t.jobs))}
	for _, id := range t.ids() {
		b, err := sortedEncode(t.jobs[id].unpacked())
		if err != nil {
			return nil, err
		}
		s.Jobs = append(s.Jobs, b)
	}
	return msgpack.Marshal(&s)
}

// sortedEncode encodes v with every map's keys in order, so equal jobs
// give equal bytes: msgpack writes a map[string][]string (an http.Header)
// in Go's random map order, SetSortMapKeys or not, but it sorts the
// map[string]any of v's generic form.
func sortedEncode(v any) ([]byte, error) {
	b, err := msgpack.Marshal(v)
	if err != nil {
		return nil, err
	}
	var g any
	if err := msgpack.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	err = enc.Encode(g)
	return buf.Bytes(), err
}

// Restore replaces the table with a snapshot's; empty bytes empty it. A
// snapshot holding a job no command could have made is refused whole.
func (t *Table) Restore(b []byte) error {
	fresh := NewTable()
	if len(b) > 0 {
		var s snapshot
		if err := wellFormed(b); err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		if err := msgpack.NewDecoder(bytes.NewReader(b)).Decode(&s); err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		if s.V != CommandVersion || len(s.Jobs) > MaxJobs {
			return fmt.Errorf("%w: version %d, %d jobs", ErrBadSnapshot, s.V, len(s.Jobs))
		}
		for i := range s.Jobs {
			j := &s.Jobs[i]
			if err := validJob(j); err != nil {
				return fmt.Errorf("%w: job %d: %w", ErrBadSnapshot, i, err)
			}
			if _, dup := fresh.jobs[j.ID]; dup {
				return fmt.Errorf("%w: job %q twice", ErrBadSnapshot, j.ID)
			}
			j.pack()
			fresh.add(j)
		}
	}
	t.mu.Lock()
	t.jobs, t.byKey, t.bytes = fresh.jobs, fresh.byKey, fresh.bytes
	t.mu.Unlock()
	return nil
}

func validJob(j *Job) error {
	switch {
	case !validID(j.ID):
		return fmt.Errorf("id %q", clip(j.ID))
	case !j.State.Valid():
		return fmt.Errorf("state %q", clip(string(j.State)))
	case j.Attempts < 0 || j.Attempts > maxAttemptNum || len(j.LastError) > maxErrorLen:
		return fmt.Errorf("attempts %d, error of %d bytes", j.Attempts, len(j.LastError))
	}
	if j.Response != nil {
		if err := j.Response.validate(); err != nil {
			return err
		}
	}
	return j.Req.Validate()
}
