package peer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"
)

// streams is the RoundTripper that carries peer calls as frames (see
// frame.go) over one connection per peer, and over HTTP (fallback) to a
// peer that does not speak them.
type streams struct {
	dial     func(ctx context.Context, addr string) (net.Conn, error)
	fallback http.RoundTripper
	idle     time.Duration // a connection with no call for this long is closed
	now      func() time.Time

	dials singleflight.Group // one dial per peer at a time, shared by its callers

	mu     sync.Mutex
	conns  map[string]*streamConn
	legacy map[string]time.Time // peers that speak no frames, until when we believe so
	closed bool
}

// legacyFor is how long a peer that refused frames is spoken to over
// HTTP before frames are tried again (it may have been upgraded).
const legacyFor = time.Minute

// streamIdle is how long a peer connection may carry no call before the
// client closes it; the server's own idle limit (api) is longer, so it
// is the client that closes, never a server under a call being sent.
const streamIdle = 90 * time.Second

// errNoFrames: the peer closed the connection instead of answering
// StreamMagic (a node of a release without frames).
var errNoFrames = errors.New("peer: the node speaks no frames")

// errStale: the connection broke before the call was written; the call
// is sent again on a new one.
var errStale = errors.New("peer: connection closed before the call was sent")

func newStreams(dial func(ctx context.Context, addr string) (net.Conn, error), fallback http.RoundTripper) *streams {
	return &streams{dial: dial, fallback: fallback, idle: streamIdle, now: time.Now,
		conns: map[string]*streamConn{}, legacy: map[string]time.Time{}}
}

// RoundTrip sends req (a peer message: POST, its path and a body of
// ContentLength bytes) as one frame and returns the answer's status and
// body. A failed connection is a dial error (*net.OpError, Op "dial"),
// which sendError reads as "not sent".
func (s *streams) RoundTrip(req *http.Request) (*http.Response, error) {
	addr := req.URL.Host
	if s.isLegacy(addr) {
		return s.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The timeout is written into the frame when it is sent (call), from
	// what is left of ctx then.
	frame, err := RequestFrame(0, 0, req.URL.Path, req.Body, int(req.ContentLength))
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		sc, err := s.conn(ctx, addr)
		if errors.Is(err, errNoFrames) {
			s.markLegacy(addr)
			req.Body = io.NopCloser(bytes.NewReader(frame[len(frame)-int(req.ContentLength):]))
			return s.fallback.RoundTrip(req)
		}
		if err == nil {
			var status int
			var body []byte
			status, body, err = sc.call(ctx, frame)
			if err == nil {
				return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
					Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
			}
			if !errors.Is(err, errStale) {
				return nil, err
			}
			if attempt == 0 {
				continue // nothing was written: the peer never saw it
			}
		}
		// Never sent: read as a failed dial (sendError: ErrNotSent).
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: stringAddr(addr), Err: err}
	}
}

type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }

func (s *streams) isLegacy(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.legacy[addr]
	if ok && !s.now().Before(until) {
		delete(s.legacy, addr)
		return false
	}
	return ok
}

func (s *streams) markLegacy(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.legacy[addr] = s.now().Add(legacyFor)
}

// conn returns the open connection to addr, dialing one if there is
// none: concurrent callers share one dial, and each waits for it at most
// until its own context ends.
func (s *streams) conn(ctx context.Context, addr string) (*streamConn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, net.ErrClosed
	}
	if sc := s.conns[addr]; sc != nil && sc.usable() {
		s.mu.Unlock()
		return sc, nil
	}
	s.mu.Unlock()
	ch := s.dials.DoChan(addr, func() (any, error) { return s.open(addr) })
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*streamConn), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// open dials addr, exchanges StreamMagic and registers the connection.
func (s *streams) open(addr string) (*streamConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	c, err := s.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if err := hello(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	sc := newStreamConn(c, s.idle)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	if old := s.conns[addr]; old != nil && old.usable() {
		// Another dial won the race (callers that saw the old connection
		// fail dial one after the other): keep the one in use.
		c.Close()
		return old, nil
	}
	s.conns[addr] = sc
	sc.start() // under s.mu: a Close now waits for its reader
	return sc, nil
}

// hello sends StreamMagic and reads it back. A peer that closes the
// connection instead speaks no frames (errNoFrames).
func hello(ctx context.Context, c net.Conn) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	if _, err := io.WriteString(c, StreamMagic); err != nil {
		return err
	}
	var b [len(StreamMagic)]byte
	_, err := io.ReadFull(c, b[:])
	switch {
	case err == nil && string(b[:]) == StreamMagic:
		return nil
	case err == nil:
		return fmt.Errorf("%w: answered %q", errNoFrames, b[:])
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		// Closed without an answer (a reset when the magic was left
		// unread): hashicorp/raft, which takes the connections of kinds
		// it does not know, on an older node.
		return fmt.Errorf("%w: %v", errNoFrames, err)
	}
	return err
}

// Close closes every connection; calls on them fail.
func (s *streams) Close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[string]*streamConn{}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.fail(net.ErrClosed)
		sc.wait()
	}
}

// streamConn is one framed connection and the calls waiting on it.
type streamConn struct {
	c     net.Conn
	w     *FrameWriter
	idle  time.Duration
	born  time.Time     // the monotonic base of lastRead, lastUse, pinged
	slots chan struct{} // a call holds one while it waits: MaxStreamCalls

	mu       sync.Mutex
	pending  map[uint64]chan streamResult
	nextID   uint64
	err      error // set once the connection broke; no call uses it after
	idler    *time.Timer
	pinged   bool // a ping is out, unanswered
	draining bool // the server sent a go-away: no new call; closed once none waits

	lastRead atomic.Int64 // since born, when a frame was last read
	lastUse  atomic.Int64 // since born, when a call was last sent
	wg       sync.WaitGroup
}

type streamResult struct {
	status int
	body   []byte
	err    error
}

func newStreamConn(c net.Conn, idle time.Duration) *streamConn {
	return &streamConn{c: c, w: NewFrameWriter(c, writeTimeout), idle: idle, born: time.Now(),
		slots: make(chan struct{}, MaxStreamCalls), pending: map[uint64]chan streamResult{}}
}

// since is the time since the connection opened, on the monotonic clock.
func (sc *streamConn) since() int64 { return int64(time.Since(sc.born)) }

func (sc *streamConn) start() {
	sc.wg.Go(sc.readLoop)
	sc.mu.Lock()
	sc.idler = time.AfterFunc(sc.idle, sc.closeIfIdle)
	sc.mu.Unlock()
}

func (sc *streamConn) wait() { sc.wg.Wait() }

func (sc *streamConn) usable() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.err == nil && !sc.draining
}

// writeTimeout bounds one write of frames: a peer that stops reading
// must not hold every caller of the connection for ever.
const writeTimeout = 10 * time.Second

// pingTimeout is how long a ping may go unanswered before the connection
// counts as dead.
const pingTimeout = 5 * time.Second

// call sends frame (its id is set here) and waits for the answer or ctx.
// A call waits for a free slot first (MaxStreamCalls), as an HTTP/2
// client waits for a stream.
func (sc *streamConn) call(ctx context.Context, frame []byte) (int, []byte, error) {
	select {
	case sc.slots <- struct{}{}:
		defer func() { <-sc.slots }()
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	ch := make(chan streamResult, 1)
	sc.mu.Lock()
	if sc.err != nil || sc.draining {
		sc.mu.Unlock()
		return 0, nil, errStale
	}
	sc.nextID++
	id := sc.nextID
	sc.pending[id] = ch
	sc.mu.Unlock()
	putHeader(frame, FrameRequest, id, len(frame)-frameHeaderLen)
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			sc.forget(id)
			return 0, nil, context.DeadlineExceeded
		}
		setTimeout(frame, left)
	}
	sent := sc.since()
	sc.lastUse.Store(sent)
	if err := sc.w.Write(frame); err != nil {
		sc.forget(id)
		sc.fail(err)
		if errors.Is(err, ErrWriteFailed) {
			return 0, nil, errStale
		}
		return 0, nil, fmt.Errorf("peer: connection lost while sending: %w", err)
	}
	select {
	case r := <-ch:
		return r.status, r.body, r.err
	case <-ctx.Done():
		sc.forget(id)
		// The server may still be serving it: a cancel frees its slot at
		// once, as an HTTP/2 client's RST_STREAM does.
		go func() { _ = sc.w.Write(CancelFrame(id)) }()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && sc.lastRead.Load() < sent {
			// Nothing arrived since the call left: the peer is slow, or the
			// connection dead (a peer cut off without a FIN). A ping tells.
			sc.ping()
		}
		return 0, nil, ctx.Err()
	}
}

// ping sends a ping unless one is out, and fails the connection if
// nothing at all is read within pingTimeout.
func (sc *streamConn) ping() {
	sc.mu.Lock()
	if sc.pinged || sc.err != nil {
		sc.mu.Unlock()
		return
	}
	sc.pinged = true
	sc.mu.Unlock()
	sent := sc.since()
	go func() {
		if err := sc.w.Write(EmptyFrame(FramePing, 0)); err != nil {
			sc.fail(err)
			return
		}
		time.AfterFunc(pingTimeout, func() {
			if sc.lastRead.Load() < sent {
				sc.fail(fmt.Errorf("peer: no answer to a ping in %v", pingTimeout))
			}
		})
	}()
}

func (sc *streamConn) forget(id uint64) {
	sc.mu.Lock()
	delete(sc.pending, id)
	sc.mu.Unlock()
}

// fail marks the connection broken, closes it and fails every call
// waiting on it: their messages may have been acted on.
func (sc *streamConn) fail(err error) {
	sc.mu.Lock()
	sc.failLocked(err)
}

// failLocked is fail with sc.mu held; it releases it.
func (sc *streamConn) failLocked(err error) {
	if sc.err != nil {
		sc.mu.Unlock()
		return
	}
	sc.err = err
	pending := sc.pending
	sc.pending = nil
	if sc.idler != nil {
		sc.idler.Stop()
	}
	sc.mu.Unlock()
	sc.c.Close()
	for _, ch := range pending {
		ch <- streamResult{err: fmt.Errorf("peer: connection lost: %w", err)}
	}
}

// closeIfIdle closes the connection when no call is waiting and none was
// sent for idle; else it looks again when that may be true. The check
// and the close are one step under sc.mu, so a call either registered
// before it (and the connection stays) or finds it closed (errStale: it
// is sent on a new one).
func (sc *streamConn) closeIfIdle() {
	sc.mu.Lock()
	if sc.err != nil {
		sc.mu.Unlock()
		return
	}
	since := time.Duration(sc.since() - sc.lastUse.Load())
	if len(sc.pending) > 0 || since < sc.idle {
		sc.idler.Reset(max(sc.idle-since, time.Second))
		sc.mu.Unlock()
		return
	}
	sc.failLocked(errors.New("peer: idle"))
}

// readLoop hands each response to its call until the connection breaks.
func (sc *streamConn) readLoop() {
	br := bufio.NewReaderSize(sc.c, 32<<10)
	for {
		f, err := ReadFrame(br)
		var r streamResult
		if err == nil {
			sc.lastRead.Store(sc.since())
			switch f.Type {
			case FramePong:
				sc.mu.Lock()
				sc.pinged = false
				sc.mu.Unlock()
				continue
			case FrameGoAway:
				sc.mu.Lock()
				sc.draining = true
				sc.closeIfDrainedLocked()
				continue
			case FrameResponse:
				r.status, r.body, err = ParseResponse(f.Payload)
			default:
				err = fmt.Errorf("%w: type %d from a server", ErrBadFrame, f.Type)
			}
		}
		if err != nil {
			sc.fail(err)
			return
		}
		sc.mu.Lock()
		ch := sc.pending[f.ID]
		delete(sc.pending, f.ID)
		if ch != nil {
			ch <- r
		}
		if sc.draining {
			sc.closeIfDrainedLocked()
			continue
		}
		sc.mu.Unlock()
	}
}

// errGoneAway closes a connection the server said it was leaving, once
// no call waits on it.
var errGoneAway = errors.New("peer: the node is stopping")

// closeIfDrainedLocked closes a draining connection once no call waits on
// it; sc.mu is held, and released.
func (sc *streamConn) closeIfDrainedLocked() {
	if len(sc.pending) == 0 {
		sc.failLocked(errGoneAway)
		return
	}
	sc.mu.Unlock()
}
