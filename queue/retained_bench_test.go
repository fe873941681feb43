package queue

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
)

// BenchmarkRetainedDoneJobHeap measures the heap a done job holds while
// it is retained (queue.retention), built as a follower builds it: from
// decoded log entries. The job is the soak's (jepsen-lite's enqueuer: a
// small JSON body, a client's usual headers, a small JSON answer).
func BenchmarkRetainedDoneJobHeap(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tb := NewTable()
		for i := range n {
			id := jobID(i + 1)
			req := &Request{Route: "comments", Tenant: "acme", Method: http.MethodPost, Path: "stories/1/comments",
				Header: http.Header{"Content-Type": {"application/json"}, "X-Tenant": {"acme"}, "User-Agent": {"Go-http-client/1.1"},
					"Accept-Encoding": {"gzip"}, "Content-Length": {"26"}},
				Body: []byte(fmt.Sprintf(`{"process":%d,"job":%d}`, i%10, i)), Key: "levee-" + id, Host: "127.0.0.1:8080"}
			for _, c := range []Command{
				{V: CommandVersion, Op: OpEnqueue, Node: "n1", At: sec(float64(i)), ID: id, Req: req, MaxJobs: MaxJobs, MaxBytes: 1 << 40},
				lease(id, "n1", sec(float64(i)+0.1), 0, sec(float64(i)+30)),
				{V: CommandVersion, Op: OpFinish, Node: "n1", At: sec(float64(i) + 0.2), ID: id, Outcome: OutcomeDone,
					Response: &Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Date": {"Wed, 02 Dec 2026 00:40:00 GMT"},
						"Content-Length": {"40"}}, Body: []byte(fmt.Sprintf(`{"created":"stories/1/comments","n":%d}`, i))}},
			} {
				enc, err := c.Encode()
				if err != nil {
					b.Fatal(err)
				}
				dec, err := DecodeCommand(enc)
				if err != nil {
					b.Fatal(err)
				}
				tb.Apply(dec)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/job")
		b.ReportMetric(float64(tb.Stats().Bytes)/n, "countedB/job")
		runtime.KeepAlive(tb)
		b.StartTimer()
	}
}
