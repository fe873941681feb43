package upstream

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// okTransport answers 200 with a small body, allocating what a real
// transport would.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	const body = `{"id":1,"comments":[1,2,3]}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

func BenchmarkDoSuccess(b *testing.B) {
	c := newClient(b, Config{Transport: okTransport{}})
	req := getReq(b, "https://api.example/v1/items/1")
	req.Limits = Limits{Rate: 1e12, Burst: 1 << 30} // measure the client, not the bucket
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Do(b.Context(), req)
		if err != nil || res.Status != 200 {
			b.Fatal(res, err)
		}
	}
}
