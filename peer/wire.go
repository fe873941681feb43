package peer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Version is the wire version every message carries.
const Version = 1

// ContentType of every peer message.
const ContentType = "application/x-msgpack"

// Paths of the peer endpoints, on each node's internal port (node.raft),
// where every connection is mutual TLS and the sender is the node its
// certificate names (see package connmux). The app port answers 404.
const (
	PathForward   = "/-/internal/forward"
	PathReplicate = "/-/internal/replicate"
	PathRaftApply = "/-/internal/raft/apply"
	// PathRaftRemove asks the leader to remove a server from the Raft
	// configuration (a follower's `levee leave`, or an operator's removal
	// accepted by a follower).
	PathRaftRemove = "/-/internal/raft/remove"
	PathLookup     = "/-/internal/lookup"
	// PathInvalidate carries writes' invalidations (Invalidate) to every
	// other node.
	PathInvalidate = "/-/internal/invalidate"
	// PathRenew asks a key's owner whether near-cached copies of its
	// answers are still its current ones (Renew).
	PathRenew = "/-/internal/renew"
)

// MaxMessage bounds a peer message in bytes (bodies are capped by route
// max_body and the upstream's 10 MiB default well below this).
const MaxMessage = 64 << 20

// ErrBadMessage wraps every decoding failure of peer bytes.
var ErrBadMessage = errors.New("peer: bad message")

// ForwardRequest is a client request handed to the key's owner.
type ForwardRequest struct {
	V        uint8               `msgpack:"v"`
	From     string              `msgpack:"from"`
	Route    string              `msgpack:"route"`
	Method   string              `msgpack:"method"`
	Path     string              `msgpack:"path"`
	RawQuery string              `msgpack:"query"`
	Header   map[string][]string `msgpack:"header"`
	Body     []byte              `msgpack:"body"`
	// Relayed marks a forward that a held owner (one that was stopped
	// moments ago, api's stand-in rule) passed on to the key's
	// successor: it is served where it arrives, never passed on again,
	// so two held nodes cannot pass it between them. Omitted (false) by
	// earlier releases, which never relay.
	Relayed bool `msgpack:"relayed,omitempty"`
}

// ForwardResponse is the owner's answer: a response, or the error the owner
// would have answered with (Err), which the receiving node relays as is.
type ForwardResponse struct {
	V        uint8               `msgpack:"v"`
	Owner    string              `msgpack:"owner"`
	Status   int                 `msgpack:"status"`
	Header   map[string][]string `msgpack:"header"`
	Body     []byte              `msgpack:"body"`
	Result   string              `msgpack:"result"`
	Age      int64               `msgpack:"age"`   // ns
	FreshFor int64               `msgpack:"fresh"` // ns of freshness left, for near caching
	Detail   string              `msgpack:"detail"`
	Attempts int                 `msgpack:"attempts"`
	Err      *RemoteError        `msgpack:"err"`
	// Key and Stored name the cached answer a fresh hit on the owner
	// served: its cache key there and when it was stored (unix ns), as a
	// later Renew names it. Empty for any other answer, and from an owner
	// that predates renewal.
	Key    string `msgpack:"key,omitempty"`
	Stored int64  `msgpack:"stored,omitempty"`
}

// RemoteError is an error answer from the owner (breaker open, budget
// spent, …): a real answer to relay, not a reason to fall back.
type RemoteError struct {
	Status     int    `msgpack:"status"`
	Title      string `msgpack:"title"`
	Detail     string `msgpack:"detail"`
	RetryAfter int64  `msgpack:"retry_after"` // ns
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("owner answered %d %s: %s", e.Status, e.Title, e.Detail)
}

// RetryAfterDuration is the owner's Retry-After.
func (e *RemoteError) RetryAfterDuration() time.Duration { return time.Duration(e.RetryAfter) }

// Entry is one cache entry pushed to a replica. Key is the owner's cache
// key; RoutingKey decides replica placement.
type Entry struct {
	V          uint8               `msgpack:"v"`
	From       string              `msgpack:"from"`
	RoutingKey string              `msgpack:"rkey"`
	Key        string              `msgpack:"key"`
	Status     int                 `msgpack:"status"`
	Header     map[string][]string `msgpack:"header"`
	Body       []byte              `msgpack:"body"`
	StoredAt   int64               `msgpack:"stored"` // unix ns
	FreshUntil int64               `msgpack:"fresh"`
	StaleUntil int64               `msgpack:"stale"`
	ErrorUntil int64               `msgpack:"error"`
}

// LookupRequest asks a replica for its entry of Key, the owner's primary
// cache key; Header is the client request's, so the replica follows a Vary
// marker to the same variant the owner would have.
type LookupRequest struct {
	V      uint8               `msgpack:"v"`
	From   string              `msgpack:"from"`
	Key    string              `msgpack:"key"`
	Header map[string][]string `msgpack:"header"`
}

// LookupResponse is a replica's answer to LookupRequest: Found with the
// entry (Entry.Key is the variant key it lives under), or not found.
type LookupResponse struct {
	V     uint8  `msgpack:"v"`
	Found bool   `msgpack:"found"`
	Entry *Entry `msgpack:"entry"`
}

// Invalidate tells a node that writes removed URLs from the cluster's
// caches: for each Tombstone it removes every answer of the routing key
// stored at or before At (cache, near cache, hand-off set) and refuses
// older copies until Until. A message is applied whole or refused whole
// (Decode validates every tombstone first), so a corrupt one loses nothing.
type Invalidate struct {
	V          uint8       `msgpack:"v"`
	From       string      `msgpack:"from"`
	Tombstones []Tombstone `msgpack:"tombs"`
}

// Tombstone is one write's removal of a URL, versioned by the write's time
// so that an older copy never outlives it while an answer fetched after
// the write is kept.
type Tombstone struct {
	RoutingKey string `msgpack:"rkey"`
	At         int64  `msgpack:"at"`    // the write's time, unix ns on its node
	Until      int64  `msgpack:"until"` // unix ns; older copies are refused until then
}

// Bounds of an Invalidate: a forged message cannot pin memory or a URL.
const (
	// MaxTombstones bounds the tombstones of one message.
	MaxTombstones = 1024
	// MaxTombstoneLife bounds Until - At.
	MaxTombstoneLife = 30 * 24 * time.Hour
)

// Renew asks a key's owner, for each near-cached copy, whether the answer
// it stored at Stored under Key is still its current fresh answer. A
// non-owner sends one per owner every eighth of a near-cache ttl, for the
// copies it served lately that are about to end, and keeps serving those
// the owner vouches for (see package replica, near.go).
type Renew struct {
	V      uint8       `msgpack:"v"`
	From   string      `msgpack:"from"`
	Copies []RenewCopy `msgpack:"copies"`
}

// RenewCopy names one copy: the owner's primary cache key, the variant key
// the answer lives under ("" when the answer does not vary: Primary), and
// when the owner stored it (ForwardResponse.Stored).
type RenewCopy struct {
	Primary string `msgpack:"primary"`
	Key     string `msgpack:"key,omitempty"`
	Stored  int64  `msgpack:"stored"`
}

// CacheKey is the key the copy's answer lives under on the owner.
func (c RenewCopy) CacheKey() string {
	if c.Key == "" {
		return c.Primary
	}
	return c.Key
}

// RenewResult is the owner's answer to Renew: for each copy, in order, how
// much longer it stays fresh on the owner (ns); 0 when the owner no longer
// holds it as its fresh answer.
type RenewResult struct {
	V        uint8   `msgpack:"v"`
	FreshFor []int64 `msgpack:"fresh"`
}

// MaxRenewCopies bounds the copies of one Renew.
const MaxRenewCopies = 4096

// RaftApply carries one encoded breaker command to the leader.
type RaftApply struct {
	V    uint8  `msgpack:"v"`
	From string `msgpack:"from"`
	Data []byte `msgpack:"data"`
}

// RaftApplyResult is the leader's answer to RaftApply.
type RaftApplyResult struct {
	V    uint8  `msgpack:"v"`
	Data []byte `msgpack:"data"`
	Err  string `msgpack:"err"`
	// Retry is set with an Err that says the cluster could not act now
	// (no leader, leadership lost, the commit timed out): the caller may
	// retry. A node of the release before it sends none, and is read as a
	// plain error.
	Retry bool `msgpack:"retry,omitempty"`
}

// RaftRemove asks the leader to remove server ID from the Raft
// configuration for good.
type RaftRemove struct {
	V    uint8  `msgpack:"v"`
	From string `msgpack:"from"`
	ID   string `msgpack:"id"`
}

// RaftRemoveResult is the leader's answer to RaftRemove; Err is empty once
// the removal is committed.
type RaftRemoveResult struct {
	V   uint8  `msgpack:"v"`
	Err string `msgpack:"err"`
	// Retry: as RaftApplyResult's.
	Retry bool `msgpack:"retry,omitempty"`
}

// versioned is implemented by every message, so Decode can check V.
type versioned interface{ version() uint8 }

func (m *ForwardRequest) version() uint8   { return m.V }
func (m *ForwardResponse) version() uint8  { return m.V }
func (m *Entry) version() uint8            { return m.V }
func (m *RaftApply) version() uint8        { return m.V }
func (m *LookupRequest) version() uint8    { return m.V }
func (m *LookupResponse) version() uint8   { return m.V }
func (m *RaftApplyResult) version() uint8  { return m.V }
func (m *RaftRemove) version() uint8       { return m.V }
func (m *RaftRemoveResult) version() uint8 { return m.V }
func (m *Invalidate) version() uint8       { return m.V }
func (m *Renew) version() uint8            { return m.V }
func (m *RenewResult) version() uint8      { return m.V }

// Encode marshals a message.
func Encode(v any) ([]byte, error) { return msgpack.Marshal(v) }

// Decode unmarshals b into a message, rejecting oversize input, trailing
// bytes, unknown versions and structurally impossible values. What it
// allocates is bounded by MaxDecoded, whatever the input (see checkShape),
// and it never panics on any input (see FuzzDecode).
func Decode(b []byte, v versioned) error { return decode(b, v, MaxDecoded) }

// decode is Decode with the decoded-size budget as a parameter, so tests
// can check the budget's accounting against the real decoder at a small
// scale.
func decode(b []byte, v versioned, budget uint64) (err error) {
	if len(b) > MaxMessage {
		return fmt.Errorf("%w: %w: %d bytes > %d", ErrBadMessage, ErrTooBig, len(b), MaxMessage)
	}
	if err := checkShape(b, budget); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil { // a decoder bug must not take the node down
			err = fmt.Errorf("%w: decoder panic: %v", ErrBadMessage, r)
		}
	}()
	rd := bytes.NewReader(b)
	// A pooled decoder (the library's own pool): every forward decodes
	// twice. It goes back only after a clean decode; a panic leaves it.
	dec := msgpack.GetDecoder()
	dec.Reset(rd)
	err = dec.Decode(v)
	msgpack.PutDecoder(dec) // drops its reader
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	if rd.Len() != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadMessage, rd.Len())
	}
	if v.version() != Version {
		return fmt.Errorf("%w: version %d, want %d", ErrBadMessage, v.version(), Version)
	}
	return validate(v)
}

func validate(v versioned) error {
	switch m := v.(type) {
	case *ForwardRequest:
		if m.Route == "" || m.Method == "" {
			return fmt.Errorf("%w: forward without route or method", ErrBadMessage)
		}
	case *ForwardResponse:
		if m.Err == nil && (m.Status < 100 || m.Status > 999) {
			return fmt.Errorf("%w: status %d", ErrBadMessage, m.Status)
		}
		if m.Err != nil && (m.Err.Status < 100 || m.Err.Status > 999) {
			return fmt.Errorf("%w: error status %d", ErrBadMessage, m.Err.Status)
		}
	case *Entry:
		return validateEntry(m)
	case *LookupRequest:
		if m.Key == "" {
			return fmt.Errorf("%w: lookup without key", ErrBadMessage)
		}
	case *LookupResponse:
		return validateLookup(m)
	case *Invalidate:
		return validateInvalidate(m)
	case *Renew:
		return validateRenew(m)
	case *RenewResult:
		if len(m.FreshFor) > MaxRenewCopies {
			return fmt.Errorf("%w: renew result of %d copies > %d", ErrBadMessage, len(m.FreshFor), MaxRenewCopies)
		}
	case *RaftApply:
		return validateRaftData(m.Data)
	case *RaftApplyResult:
		return validateRaftData(m.Data)
	}
	return nil
}

func validateRaftData(b []byte) error {
	if len(b) > MaxRaftData {
		return fmt.Errorf("%w: %w: raft data of %d bytes > %d", ErrBadMessage, ErrTooBig, len(b), MaxRaftData)
	}
	return nil
}

// validateInvalidate checks every tombstone, so that a message is applied
// whole or not at all.
func validateInvalidate(m *Invalidate) error {
	if len(m.Tombstones) == 0 || len(m.Tombstones) > MaxTombstones {
		return fmt.Errorf("%w: invalidate with %d tombstones, want 1 to %d", ErrBadMessage, len(m.Tombstones), MaxTombstones)
	}
	for i, t := range m.Tombstones {
		switch {
		case t.RoutingKey == "":
			return fmt.Errorf("%w: tombstone %d without a routing key", ErrBadMessage, i)
		case t.At <= 0 || t.Until <= t.At || t.Until-t.At > int64(MaxTombstoneLife):
			return fmt.Errorf("%w: tombstone %d at %d until %d: want 0 < at < until <= at+%v", ErrBadMessage, i, t.At, t.Until, MaxTombstoneLife)
		}
	}
	return nil
}

// validateRenew: 1 to MaxRenewCopies copies, each naming a stored answer
// under its primary key (a variant key extends it past a NUL).
func validateRenew(m *Renew) error {
	if len(m.Copies) == 0 || len(m.Copies) > MaxRenewCopies {
		return fmt.Errorf("%w: renew with %d copies, want 1 to %d", ErrBadMessage, len(m.Copies), MaxRenewCopies)
	}
	for i, c := range m.Copies {
		if c.Primary == "" || c.Stored <= 0 ||
			c.Key != "" && !strings.HasPrefix(c.Key, c.Primary+"\x00") {
			return fmt.Errorf("%w: renew copy %d: key %q under %q stored %d", ErrBadMessage, i, c.Key, c.Primary, c.Stored)
		}
	}
	return nil
}

func validateEntry(m *Entry) error {
	if m.Key == "" || m.Status < 100 && m.Status != 0 || m.Status > 999 || m.StoredAt <= 0 {
		return fmt.Errorf("%w: entry key %q status %d", ErrBadMessage, m.Key, m.Status)
	}
	return nil
}

// validateLookup: a found entry must be a real answer, never a Vary marker
// (Status 0), which the replica follows itself.
func validateLookup(m *LookupResponse) error {
	if m.Found != (m.Entry != nil) {
		return fmt.Errorf("%w: lookup found=%v with entry=%v", ErrBadMessage, m.Found, m.Entry != nil)
	}
	if m.Entry == nil {
		return nil
	}
	if m.Entry.Status == 0 {
		return fmt.Errorf("%w: lookup answered a Vary marker", ErrBadMessage)
	}
	return validateEntry(m.Entry)
}

// EncodeTo encodes v into a pooled buffer and hands the bytes to write,
// which must be done with them when it returns (an http.ResponseWriter's
// Write is: it copies or sends them). Every forward's answer is encoded
// so: the owner allocates no buffer to encode a hit.
func EncodeTo(v any, write func([]byte) error) error {
	buf := encodeBufs.Get().(*bytes.Buffer)
	buf.Reset()
	enc := msgpack.GetEncoder()
	enc.Reset(buf)
	err := enc.Encode(v)
	msgpack.PutEncoder(enc)
	if err == nil {
		err = write(buf.Bytes())
	}
	if buf.Cap() <= maxPooledBuffer {
		encodeBufs.Put(buf)
	}
	return err
}

// maxPooledBuffer: a buffer that grew past it for a large body goes to
// the garbage collector rather than back to the pool, so the pool never
// pins megabytes.
const maxPooledBuffer = 64 << 10

// encodeBufs is EncodeTo's buffers; a sync.Pool holds no state a caller
// can see (net/http and the msgpack library keep theirs the same way).
var encodeBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}
