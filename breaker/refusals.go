package breaker

import (
	"log/slog"
	"sync"
	"time"
)

// refusalLogEvery is how often, at most, the leader logs the forwarded
// commands one sender had refused.
const refusalLogEvery = time.Minute

// maxRefusalSenders bounds the senders remembered between log lines. The
// sender is a name the caller states (any holder of cluster.secret can
// state any name), so the map must not grow with what a forger sends;
// past the bound, unknown senders share one slot.
const maxRefusalSenders = 256

// RefusalLog is consensus.Config.OnRefused on a leader (Refused): it counts every
// forwarded command the breaker's rules refused, by reason, and logs them
// at most once per sender per refusalLogEvery, with how many went
// unlogged in between, so a broken or hostile node cannot flood the log.
type RefusalLog struct {
	log   *slog.Logger
	now   func() time.Time
	count func(reason string) // nil: not counted

	mu      sync.Mutex
	senders map[string]*refusalSender
}

type refusalSender struct {
	logged     time.Time // when its last line was written
	suppressed int       // refusals since, not logged
}

func NewRefusalLog(log *slog.Logger, now func() time.Time, count func(string)) *RefusalLog {
	if now == nil {
		now = time.Now
	}
	return &RefusalLog{log: log, now: now, count: count, senders: map[string]*refusalSender{}}
}

// Refused records one refused command from sender from
// (consensus.Config.OnRefused).
func (l *RefusalLog) Refused(from string, err error) {
	reason := RefusalReason(err)
	if reason == "" {
		reason = ReasonMalformed // refused by the Mux: not an entry of a known machine
	}
	if l.count != nil {
		l.count(reason)
	}
	suppressed, ok := l.due(from)
	if !ok {
		return
	}
	l.log.Warn("refused a forwarded raft command", "from", from, "reason", reason, "err", err,
		"suppressed", suppressed)
}

// due reports whether from's refusal is to be logged now, with how many of
// its refusals were not logged since its last line.
func (l *RefusalLog) due(from string) (suppressed int, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sender(from, now)
	if !s.logged.IsZero() && now.Sub(s.logged) < refusalLogEvery {
		s.suppressed++
		return 0, false
	}
	suppressed, s.suppressed, s.logged = s.suppressed, 0, now
	return suppressed, true
}

// sender returns from's entry, first forgetting senders quiet for a whole
// period when the map is full; still full, from shares the "" slot.
func (l *RefusalLog) sender(from string, now time.Time) *refusalSender {
	if s, ok := l.senders[from]; ok {
		return s
	}
	if len(l.senders) >= maxRefusalSenders {
		for name, s := range l.senders {
			if now.Sub(s.logged) >= refusalLogEvery && s.suppressed == 0 {
				delete(l.senders, name)
			}
		}
	}
	if len(l.senders) >= maxRefusalSenders {
		from = ""
		if s, ok := l.senders[from]; ok {
			return s
		}
	}
	s := &refusalSender{}
	l.senders[from] = s
	return s
}
