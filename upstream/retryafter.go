package upstream

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter keeps a huge delta-seconds value from overflowing a
// Duration; Retry.RetryAfterCap bounds the actual wait far below it.
const maxRetryAfter = 100 * 365 * 24 * time.Hour

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): either
// delta-seconds or an HTTP-date, the latter relative to now and floored at 0.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return parseHuge(v)
		}
		if secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// parseHuge accepts an all-digit value too large for uint64 as the maximum.
func parseHuge(v string) (time.Duration, bool) {
	for i := range len(v) {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	return maxRetryAfter, true
}
