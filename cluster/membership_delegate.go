package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/memberlist"
	"github.com/vmihailenco/msgpack/v5"
)

// ErrBadNodeMeta reports node metadata from a peer that does not decode.
var ErrBadNodeMeta = errors.New("cluster: bad node metadata")

// nodeMeta is what each node gossips about itself beyond its gossip
// address. Short keys: memberlist caps metadata at 512 bytes.
type nodeMeta struct {
	HTTPAddr string `msgpack:"h"`
	RaftAddr string `msgpack:"r"`
	// PeerAddr is where peer messages reach the node (its internal port,
	// the Raft port unless a test injects a Raft transport). Nodes that
	// predate it serve peers on HTTPAddr instead and omit it.
	PeerAddr string `msgpack:"p,omitempty"`
	// Leaving is set by Leave just before the leave broadcast, so peers
	// can tell a graceful leave from a failure.
	Leaving bool `msgpack:"l,omitempty"`
	// Bootstrapped is set once the node holds Raft state (SetBootstrapped),
	// so a fresh node never bootstraps a second cluster next to it. Nodes
	// that predate the field omit it and decode as false.
	Bootstrapped bool `msgpack:"b,omitempty"`
}

func encodeNodeMeta(m nodeMeta) ([]byte, error) {
	return msgpack.Marshal(m)
}

// decodeNodeMeta decodes a peer's metadata; unknown keys are ignored so a
// newer node can add fields.
func decodeNodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(b) == 0 {
		return m, fmt.Errorf("%w: empty", ErrBadNodeMeta)
	}
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return nodeMeta{}, fmt.Errorf("%w: %w", ErrBadNodeMeta, err)
	}
	return m, nil
}

// memberMeta implements memberlist.Delegate only to supply NodeMeta; Levee
// sends no user messages over gossip.
type memberMeta struct{ m *Membership }

func (d memberMeta) NodeMeta(limit int) []byte {
	meta, err := encodeNodeMeta(d.m.localMeta())
	if err != nil || len(meta) > limit {
		// Validate checked the size with every flag set, so this is
		// unreachable; returning nil beats memberlist's panic on oversize.
		d.m.log.Error("node metadata unusable", "err", err, "bytes", len(meta), "limit", limit)
		return nil
	}
	return meta
}

func (memberMeta) NotifyMsg([]byte)                           {}
func (memberMeta) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (memberMeta) LocalState(join bool) []byte                { return nil }
func (memberMeta) MergeRemoteState(buf []byte, join bool)     {}

// memberEvents implements memberlist.EventDelegate. Memberlist calls it
// with its node lock held, so it must only record and enqueue, never block.
type memberEvents struct{ m *Membership }

func (d memberEvents) NotifyJoin(n *memberlist.Node)   { d.m.onJoin(n) }
func (d memberEvents) NotifyUpdate(n *memberlist.Node) { d.m.onUpdate(n) }
func (d memberEvents) NotifyLeave(n *memberlist.Node)  { d.m.onLeave(n) }

// memberEventQueue is an unbounded FIFO between memberlist's callbacks and
// the Events channel: push never blocks, so a slow consumer cannot stall
// gossip. Membership changes are rare (a handful per node restart), so the
// backlog stays small even when nobody reads.
type memberEventQueue struct {
	mu      sync.Mutex
	pending []Event
	wake    chan struct{} // capacity 1: "pending may be non-empty"
}

func newMemberEventQueue() *memberEventQueue {
	return &memberEventQueue{wake: make(chan struct{}, 1)}
}

func (q *memberEventQueue) push(e Event) {
	q.mu.Lock()
	q.pending = append(q.pending, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (q *memberEventQueue) take() []Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.pending
	q.pending = nil
	return batch
}

// pump delivers queued events to out in order until ctx ends; events still
// queued then are dropped.
func (q *memberEventQueue) pump(ctx context.Context, out chan<- Event) {
	for {
		for _, e := range q.take() {
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return
		}
	}
}

// memberlistLogWriter turns memberlist's "[LEVEL] memberlist: msg" lines
// into slog records at the matching level.
type memberlistLogWriter struct{ log *slog.Logger }

func (w memberlistLogWriter) Write(p []byte) (int, error) {
	level, msg := parseMemberlistLine(string(p))
	w.log.Log(context.Background(), level, msg)
	return len(p), nil
}

func parseMemberlistLine(line string) (slog.Level, string) {
	line = strings.TrimSpace(line)
	level := slog.LevelInfo
	for _, tag := range []struct {
		prefix string
		level  slog.Level
	}{
		{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo},
		{"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError},
	} {
		if rest, ok := strings.CutPrefix(line, tag.prefix); ok {
			level, line = tag.level, strings.TrimSpace(rest)
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	return level, line
}
