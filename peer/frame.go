package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Frames carry peer calls over one multiplexed connection per peer
// (connmux.KindStream), instead of one HTTP/2 stream each: a call is a
// request frame naming the message's path and its msgpack body, its
// answer a response frame with the HTTP status the same message would
// have had and the reply's body, matched by the call's id. Many calls
// share the connection at once and answers come back in any order. It
// is the shape of memcached's binary protocol (a fixed header with an
// opaque id the server echoes), and the messages, their bounds and
// their handlers are those of HTTP: only the framing is cheaper.
//
// After the connection's kind byte, the client sends StreamMagic and
// waits for the server to send it back before its first frame: a node of
// a release without frames hands the connection to Raft, which closes
// it, and the client then speaks HTTP to that node.
//
// A frame is a 13-byte header, then its payload:
//
//	length  uint32  the payload's length (at most MaxFrame)
//	type    byte    FrameRequest, FrameResponse or FrameCancel
//	id      uint64  the call, chosen by the client, unique on its connection
//
// A request's payload is its timeout in milliseconds (uint32; 0: none),
// the path's length (one byte), the path, then the body. A response's is
// its status (uint16), then the body. A cancel has none: the client gave
// up on the call, and the server ends the handler's context. A ping has
// none either, and the server answers it with a pong at once: a client
// whose call timed out with nothing heard since sends one, and closes a
// connection that does not answer (HTTP/2's PING, RFC 9113 §6.7). A
// go-away, none: the server is stopping; the client sends no new call on
// the connection and waits for the answers to those it sent, which the
// server still serves (HTTP/2's GOAWAY, §6.8).
const (
	FrameRequest  byte = 1
	FrameResponse byte = 2
	FrameCancel   byte = 3
	FramePing     byte = 4
	FramePong     byte = 5
	FrameGoAway   byte = 6
)

// StreamMagic opens a framed connection, both ways.
const StreamMagic = "LVF1"

// frameHeaderLen is a frame header's size.
const frameHeaderLen = 13

// MaxFrame bounds a frame's payload: a message (MaxMessage) and what a
// request adds to it.
const MaxFrame = MaxMessage + 512

// MaxStreamCalls is how many calls one framed connection carries at
// once: a client waits for one of them to end before it sends more, and
// a server answers a call beyond it 503 without serving it.
const MaxStreamCalls = 1000

// ErrBadFrame is a frame that breaks the format; the connection it came
// on is closed.
var ErrBadFrame = errors.New("peer: bad frame")

// Frame is one frame as read.
type Frame struct {
	Type    byte
	ID      uint64
	Payload []byte
}

// ReadFrame reads one frame from r. It allocates the payload on the
// sender's word only up to MaxPresized, as ReadBody does, and refuses a
// length over MaxFrame before reading it.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [frameHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(h[0:4])
	f := Frame{Type: h[4], ID: binary.BigEndian.Uint64(h[5:13])}
	switch {
	case f.Type < FrameRequest || f.Type > FrameGoAway:
		return Frame{}, fmt.Errorf("%w: type %d", ErrBadFrame, f.Type)
	case n > MaxFrame:
		return Frame{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadFrame, n, MaxFrame)
	case f.Type >= FrameCancel && n != 0:
		return Frame{}, fmt.Errorf("%w: a frame of type %d with a payload", ErrBadFrame, f.Type)
	}
	var err error
	f.Payload, err = ReadBody(io.LimitReader(r, int64(n)), int64(n))
	if err == nil && len(f.Payload) != int(n) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return Frame{}, err
	}
	return f, nil
}

// putHeader writes a frame header for a payload of n bytes into b[:13].
func putHeader(b []byte, typ byte, id uint64, n int) {
	binary.BigEndian.PutUint32(b[0:4], uint32(n))
	b[4] = typ
	binary.BigEndian.PutUint64(b[5:13], id)
}

// RequestFrame is the whole request frame of a call: id, the time the
// caller still waits (rounded up to a millisecond; ≤ 0: none), the
// message's path and its body. The body is read into the frame, so a
// call is one buffer and one write.
func RequestFrame(id uint64, timeout time.Duration, path string, body io.Reader, bodyLen int) ([]byte, error) {
	if len(path) == 0 || len(path) > 255 {
		return nil, fmt.Errorf("%w: path of %d bytes", ErrBadFrame, len(path))
	}
	if bodyLen < 0 || bodyLen > MaxMessage {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrBadFrame, bodyLen)
	}
	n := 4 + 1 + len(path) + bodyLen
	b := make([]byte, frameHeaderLen+n)
	putHeader(b, FrameRequest, id, n)
	setTimeout(b, timeout)
	p := b[frameHeaderLen:]
	p[4] = byte(len(path))
	copy(p[5:], path)
	if body != nil {
		if _, err := io.ReadFull(body, p[5+len(path):]); err != nil {
			return nil, fmt.Errorf("peer: reading the message: %w", err)
		}
	}
	return b, nil
}

// setTimeout writes timeout (rounded up to a millisecond; ≤ 0: none) into
// request frame b.
func setTimeout(b []byte, timeout time.Duration) {
	ms := uint32(0)
	if timeout > 0 {
		ms = uint32(min((timeout+time.Millisecond-1)/time.Millisecond, 1<<32-1))
	}
	binary.BigEndian.PutUint32(b[frameHeaderLen:], ms)
}

// StreamRequest is a request frame's payload, parsed.
type StreamRequest struct {
	Timeout time.Duration // 0: none
	Path    string
	Body    []byte
}

// ParseRequest parses a request frame's payload. Body aliases payload.
func ParseRequest(payload []byte) (StreamRequest, error) {
	if len(payload) < 5 {
		return StreamRequest{}, fmt.Errorf("%w: request of %d bytes", ErrBadFrame, len(payload))
	}
	pl := int(payload[4])
	if pl == 0 || len(payload) < 5+pl {
		return StreamRequest{}, fmt.Errorf("%w: path of %d bytes in a request of %d", ErrBadFrame, pl, len(payload))
	}
	ms := binary.BigEndian.Uint32(payload[0:4])
	return StreamRequest{Timeout: time.Duration(ms) * time.Millisecond, Path: string(payload[5 : 5+pl]), Body: payload[5+pl:]}, nil
}

// ResponseHeaderLen is how many bytes a response frame has before its
// body.
const ResponseHeaderLen = frameHeaderLen + 2

// ResponseFrame is the whole response frame answering call id.
func ResponseFrame(id uint64, status int, body []byte) []byte {
	b := make([]byte, ResponseHeaderLen+len(body))
	copy(b[ResponseHeaderLen:], body)
	PutResponseHeader(b, id, status)
	return b
}

// PutResponseHeader fills frame[:ResponseHeaderLen] for the answer to
// call id whose body is frame[ResponseHeaderLen:], so a server can
// build the body in place behind it.
func PutResponseHeader(frame []byte, id uint64, status int) {
	putHeader(frame, FrameResponse, id, len(frame)-frameHeaderLen)
	binary.BigEndian.PutUint16(frame[frameHeaderLen:], uint16(status))
}

// ParseResponse parses a response frame's payload. body aliases payload.
func ParseResponse(payload []byte) (status int, body []byte, err error) {
	if len(payload) < 2 {
		return 0, nil, fmt.Errorf("%w: response of %d bytes", ErrBadFrame, len(payload))
	}
	status = int(binary.BigEndian.Uint16(payload))
	if status < 100 || status > 599 {
		return 0, nil, fmt.Errorf("%w: status %d", ErrBadFrame, status)
	}
	return status, payload[2:], nil
}

// CancelFrame is the frame that gives up on call id.
func CancelFrame(id uint64) []byte { return EmptyFrame(FrameCancel, id) }

// EmptyFrame is a frame of typ without a payload: a cancel, a ping, a
// pong or a go-away.
func EmptyFrame(typ byte, id uint64) []byte {
	b := make([]byte, frameHeaderLen)
	putHeader(b, typ, id, 0)
	return b
}

// FrameWriter writes frames to one connection for many goroutines at
// once, batching them (a group commit): a frame written while another
// write is under way joins the next batch, and the writer that finds the
// connection free writes each waiting batch in one write. Under load a
// connection costs a write per batch, not per frame; alone, a frame is
// written at once. Write returns once its frame was written, so a server
// counts an answer done only when it left, and what waits is bounded
// (maxQueued): a peer that stops reading holds its writers, it cannot
// grow the queue.
type FrameWriter struct {
	c       net.Conn
	timeout time.Duration

	mu      sync.Mutex
	cond    sync.Cond // a batch was written, or the connection failed
	queue   []byte    // the next batch: frames waiting for the write under way
	spare   []byte    // the last batch's buffer, reused
	writing bool
	next    uint64 // the number the queue will be written as
	done    uint64 // the last batch written or failed
	failed  uint64 // the batch that failed, once err is set
	err     error  // the failed write's error; every later Write fails
}

// NewFrameWriter writes to c, each batch within timeout.
func NewFrameWriter(c net.Conn, timeout time.Duration) *FrameWriter {
	w := &FrameWriter{c: c, timeout: timeout, next: 1}
	w.cond.L = &w.mu
	return w
}

// maxQueued bounds the bytes waiting for the write under way; a frame
// that would pass it waits for that write (a lone bigger frame does
// not).
const maxQueued = 4 << 20

// maxSpare bounds the batch buffer a FrameWriter keeps for the next.
const maxSpare = 256 << 10

// ErrWriteFailed: an earlier write on the connection failed, so this
// frame was not written at all.
var ErrWriteFailed = errors.New("peer: the connection failed an earlier write")

// Write writes frame, in a batch with others, and returns once that batch
// was written. An error wrapping ErrWriteFailed means frame was not
// written at all; any other error is its batch's write, which may have
// sent part of it. A failed write closes the connection. Each writer
// writes at most one batch, the one holding its own frame: the writers
// waiting behind it take turns, so none is held writing everyone else's
// frames under steady load.
func (w *FrameWriter) Write(frame []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && w.writing && len(w.queue) > 0 && len(w.queue)+len(frame) > maxQueued {
		w.cond.Wait()
	}
	if w.err != nil {
		return fmt.Errorf("%w: %w", ErrWriteFailed, w.err)
	}
	w.queue = append(w.queue, frame...)
	mine := w.next // the queue is written as batch w.next
	for w.err == nil && w.done < mine {
		if w.writing {
			w.cond.Wait()
			continue
		}
		w.writeBatchLocked() // the queue, holding frame: batch mine
	}
	switch {
	case w.err == nil || w.failed > mine:
		return nil
	case w.failed == mine:
		return w.err
	}
	return fmt.Errorf("%w: %w", ErrWriteFailed, w.err)
}

// writeBatchLocked writes the queue as one batch; w.mu is held but
// during the write.
func (w *FrameWriter) writeBatchLocked() {
	w.writing = true
	batch, n := w.queue, w.next
	w.queue, w.spare, w.next = w.spare, nil, n+1
	w.mu.Unlock()
	_ = w.c.SetWriteDeadline(time.Now().Add(w.timeout))
	_, err := w.c.Write(batch)
	w.mu.Lock()
	w.writing, w.done = false, n
	if err != nil {
		w.err, w.failed, w.queue = err, n, nil
		w.c.Close() // its reader then fails the calls whose frames were lost
	} else if cap(batch) <= maxSpare {
		w.spare = batch[:0] // a burst's big buffer is not kept
	}
	w.cond.Broadcast()
}
