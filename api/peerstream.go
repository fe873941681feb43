package api

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee/levee/peer"
)

// The framed side of the peer port (peer/frame.go): each connection
// carries many calls at once, each one served by the same handler as a
// peer message over HTTP (authentication, bounds, answers and their
// statuses alike), through an http.Request built from its frame.

// streamIdleTimeout closes a framed connection that sent no frame for
// this long: a client that went away without closing it. Clients close
// their own idle connections sooner (peer's streamIdle).
const streamIdleTimeout = 10 * time.Minute

// serverStreamCalls is how many calls a framed connection may have served
// at once: twice what a client sends (peer.MaxStreamCalls), since a
// client frees a call's slot when it gives up and the server only once
// the handler has seen the cancel; a call beyond it is answered 503.
const serverStreamCalls = 2 * peer.MaxStreamCalls

// streamHelloTimeout bounds reading a new connection's StreamMagic.
const streamHelloTimeout = 10 * time.Second

// streamConns are the framed connections being served, closed by
// Shutdown.
type streamConns struct {
	mu     sync.Mutex
	conns  map[*serverStream]struct{}
	closed bool
}

func (s *streamConns) add(ss *serverStream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = map[*serverStream]struct{}{}
	}
	s.conns[ss] = struct{}{}
	return true
}

func (s *streamConns) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *streamConns) remove(ss *serverStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, ss)
}

// goAway tells every connection's client the server is stopping: it
// sends no new call there and waits for the answers to those it sent.
// Written in the background: a client that does not read must not hold
// Shutdown.
func (s *streamConns) goAway() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range s.conns {
		go ss.write(peer.EmptyFrame(peer.FrameGoAway, 0))
	}
}

// closeAll closes every connection and refuses new ones.
func (s *streamConns) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for ss := range conns {
		ss.c.Close()
	}
}

// serveStreams accepts framed connections on ln until it closes; each
// connection's node is sender's name for it, and one without a name is
// closed unread.
func (ps *PeerServer) serveStreams(ln net.Listener, h http.Handler, sender func(net.Conn) (string, bool), log *slog.Logger) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		name, ok := sender(c)
		if !ok {
			c.Close()
			continue
		}
		ss := &serverStream{c: c, name: name, h: h, log: log, sem: make(chan struct{}, serverStreamCalls),
			w: peer.NewFrameWriter(c, peerWriteTimeout), inflight: &ps.inflight, cancels: map[uint64]context.CancelFunc{}}
		if !ps.streams.add(ss) {
			c.Close()
			continue
		}
		ps.wg.Go(func() {
			defer ps.streams.remove(ss)
			ss.serve()
		})
	}
}

// serverStream serves one framed connection.
type serverStream struct {
	c    net.Conn
	name string
	h    http.Handler
	log  *slog.Logger
	sem  chan struct{} // calls being served: serverStreamCalls
	w    *peer.FrameWriter

	inflight *atomic.Int64 // the PeerServer's: calls read and not yet answered

	mu      sync.Mutex
	cancels map[uint64]context.CancelFunc
}

func (ss *serverStream) serve() {
	defer ss.c.Close()
	br := bufio.NewReaderSize(ss.c, 32<<10)
	if !ss.hello(br) {
		return
	}
	// When the connection ends its calls are canceled, not waited for:
	// as with net/http's Close, a handler that ignores its context does
	// not hold Shutdown past its own context.
	base, cancelAll := context.WithCancel(peer.WithSender(context.Background(), ss.name))
	defer cancelAll()
	for {
		_ = ss.c.SetReadDeadline(time.Now().Add(streamIdleTimeout))
		f, err := peer.ReadFrame(br)
		if err != nil {
			if err != io.EOF {
				ss.log.Debug("peer stream closed", "from", ss.name, "err", err)
			}
			return
		}
		switch f.Type {
		case peer.FrameCancel:
			ss.mu.Lock()
			cancel := ss.cancels[f.ID]
			ss.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		case peer.FramePing:
			ss.write(peer.EmptyFrame(peer.FramePong, f.ID))
		case peer.FrameRequest:
			ss.start(base, f)
		default:
			ss.log.Debug("peer stream closed", "from", ss.name, "err", "a response frame from a client")
			return
		}
	}
}

// start serves request frame f on its own goroutine; the read loop never
// waits for it. A call is counted in flight (Shutdown waits for it to be
// quiet) from the moment its frame is read until its answer has been
// written. A call beyond serverStreamCalls is answered 503 unserved.
func (ss *serverStream) start(base context.Context, f peer.Frame) {
	select {
	case ss.sem <- struct{}{}:
	default:
		ss.write(peer.ResponseFrame(f.ID, http.StatusServiceUnavailable, nil))
		return
	}
	ctx, cancel := context.WithCancel(base)
	ss.mu.Lock()
	_, dup := ss.cancels[f.ID]
	if !dup {
		ss.cancels[f.ID] = cancel
	}
	ss.mu.Unlock()
	if dup {
		// A call id names one call in flight: a second would take the
		// first's cancel, and its answer would be read as the first's.
		cancel()
		<-ss.sem
		ss.write(peer.ResponseFrame(f.ID, http.StatusBadRequest, nil))
		return
	}
	ss.inflight.Add(1)
	go func() {
		defer func() {
			ss.mu.Lock()
			delete(ss.cancels, f.ID)
			ss.mu.Unlock()
			cancel()
			<-ss.sem
			ss.inflight.Add(-1)
		}()
		ss.call(ctx, f)
	}()
}

// hello reads StreamMagic and sends it back.
func (ss *serverStream) hello(br *bufio.Reader) bool {
	_ = ss.c.SetDeadline(time.Now().Add(streamHelloTimeout))
	var b [len(peer.StreamMagic)]byte
	if _, err := io.ReadFull(br, b[:]); err != nil || string(b[:]) != peer.StreamMagic {
		return false
	}
	if _, err := io.WriteString(ss.c, peer.StreamMagic); err != nil {
		return false
	}
	_ = ss.c.SetDeadline(time.Time{})
	return true
}

// call serves one request frame and writes its answer.
func (ss *serverStream) call(ctx context.Context, f peer.Frame) {
	req, err := peer.ParseRequest(f.Payload)
	if err != nil {
		ss.write(peer.ResponseFrame(f.ID, http.StatusBadRequest, nil))
		return
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	r := (&http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: req.Path}, RequestURI: req.Path,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {peer.ContentType}},
		Body:          io.NopCloser(bytes.NewReader(req.Body)),
		ContentLength: int64(len(req.Body)),
		RemoteAddr:    ss.c.RemoteAddr().String(),
	}).WithContext(ctx)
	w := &frameWriter{header: http.Header{}}
	ss.h.ServeHTTP(w, r)
	if len(w.buf) > peer.ResponseHeaderLen+peer.MaxMessage {
		// More than a client reads: this call fails, not the connection.
		ss.log.Warn("peer answer too large", "path", req.Path, "from", ss.name, "bytes", len(w.buf)-peer.ResponseHeaderLen)
		ss.write(peer.ResponseFrame(f.ID, http.StatusInternalServerError, nil))
		return
	}
	ss.write(w.frame(f.ID))
}

func (ss *serverStream) write(frame []byte) {
	_ = ss.w.Write(frame) // a failed write closes the connection: the sender's to notice
}

// peerWriteTimeout bounds writing a batch of answers: a client that stops
// reading must not hold the connection's other answers for ever.
const peerWriteTimeout = 10 * time.Second

// frameWriter is the http.ResponseWriter of a framed call: it keeps the
// status and builds the response frame around the body, sized from the
// handler's Content-Length when it sets one.
type frameWriter struct {
	header http.Header
	status int
	buf    []byte // the frame: header and status reserved, then the body
}

func (w *frameWriter) Header() http.Header { return w.header }

func (w *frameWriter) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	n, _ := strconv.Atoi(w.header.Get("Content-Length"))
	w.buf = make([]byte, peer.ResponseHeaderLen, peer.ResponseHeaderLen+min(max(n, 0), peer.MaxPresized))
}

func (w *frameWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// frame is the response frame for call id.
func (w *frameWriter) frame(id uint64) []byte {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	peer.PutResponseHeader(w.buf, id, w.status)
	return w.buf
}
