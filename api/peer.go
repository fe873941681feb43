package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee/levee/consensus"
	"github.com/levee/levee/peer"
	"github.com/levee/levee/proxy"
)

// PeerEndpoint is a node-to-node message another package serves (replica's
// replicate and lookup). api authenticates the caller and reads the bounded
// body; Serve decodes it, acts, and returns the encoded msgpack reply (nil:
// an empty 200). An error refuses the message: 400, ErrBadPeerFrame.
type PeerEndpoint struct {
	// Path is the message's path, one of peer's Path constants.
	Path string
	// Serve handles one authenticated message body.
	Serve func(ctx context.Context, body []byte) (reply []byte, err error)
}

// RaftApplier applies a breaker command a follower handed to this node, the
// Raft leader. from is the sending node, as its certificate names it. An
// error wrapping consensus.ErrRefused means the command was checked and
// refused before anything was appended.
type RaftApplier interface {
	ApplyFromPeer(ctx context.Context, from string, data []byte) ([]byte, error)
}

// RaftRemover removes a server from the Raft configuration on this node,
// the leader, for a follower that handed the removal over.
type RaftRemover interface {
	RemoveFromPeer(ctx context.Context, id string) error
}

// PeerConfig configures the node-to-node endpoints.
type PeerConfig struct {
	// Sender names the node at the other end of a connection, from its
	// verified certificate (clustertls.NameOf). A call on a connection it
	// names no node for is refused with 401 before anything is read.
	// Required by ServePeers.
	Sender func(net.Conn) (string, bool)
	// Endpoints are the messages other packages serve. Default nil: only
	// forward (and Raft, when set) are mounted; other paths answer 404.
	Endpoints []PeerEndpoint
	// Raft applies forwarded breaker commands. Default nil: 404.
	Raft RaftApplier
	// RaftRemove runs forwarded Raft removals. Default nil: 404.
	RaftRemove RaftRemover
	// Streams is the internal port's listener for framed connections
	// (connmux.KindStream, peer/frame.go): the same messages, served by
	// the same handler, many at once on one connection. Default nil:
	// HTTP only.
	Streams net.Listener
}

// PeerServer serves the node-to-node endpoints on the internal port.
type PeerServer struct {
	srv      *http.Server
	wg       sync.WaitGroup
	inflight atomic.Int64 // peer messages whose handler is running
	conns    connStates   // connections with a message still being answered
	streamLn net.Listener // PeerConfig.Streams
	streams  streamConns  // framed connections being served
}

// peerHeaderTimeout bounds reading a peer message's headers; the body is
// bounded by peer.MaxMessage, and the sender's own timeout
// (cluster.forward_timeout) bounds the rest.
const peerHeaderTimeout = 10 * time.Second

// ServePeers serves the node-to-node endpoints on ln until Shutdown. ln is
// the internal port's peer listener (connmux.KindPeer): every connection
// on it has passed mutual TLS, and pc.Sender names its node. The app port
// never serves them: /-/internal/ there is a 404.
func (s *Server) ServePeers(ln net.Listener, pc PeerConfig) *PeerServer {
	ps := &PeerServer{streamLn: pc.Streams}
	h := counting(&ps.inflight, s.PeerHandler(pc))
	ps.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: peerHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if nc, ok := c.(namedConn); ok {
				return peer.WithSender(ctx, nc.name)
			}
			return ctx
		},
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: peerStreams},
		ConnState: ps.conns.track,
	}
	// HTTP/1.1, and HTTP/2 with prior knowledge (peer.ClientConfig.HTTP2).
	ps.srv.Protocols = new(http.Protocols)
	ps.srv.Protocols.SetHTTP1(true)
	ps.srv.Protocols.SetUnencryptedHTTP2(true)
	ps.wg.Go(func() { _ = ps.srv.Serve(namingListener{Listener: ln, sender: pc.Sender}) })
	if pc.Streams != nil {
		ps.wg.Go(func() { ps.serveStreams(pc.Streams, h, pc.Sender, s.cfg.Logger) })
	}
	s.started.addPeers(ps)
	return ps
}

// peerStreams is how many peer calls one HTTP/2 connection carries at
// once, as many as a framed one; a client with more opens another
// connection.
const peerStreams = peer.MaxStreamCalls

// namingListener names each connection's node once, from its TLS state,
// and hides the TLS type from net/http: the handshake is done, and the
// connection's HTTP/2 is the prior-knowledge kind.
type namingListener struct {
	net.Listener
	sender func(net.Conn) (string, bool)
}

func (l namingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	name, ok := l.sender(c)
	if !ok {
		name = ""
	}
	return namedConn{Conn: c, name: name}, nil
}

// namedConn is a connection whose sender is known ("" if none).
type namedConn struct {
	net.Conn
	name string
}

// Shutdown stops accepting peer messages and waits, until ctx ends, for
// those being answered, then closes the connections.
//
// It does not wait for the senders to hang up: net/http's HTTP/2 server
// answers Shutdown with a GOAWAY and then keeps each connection until the
// client closes it or its goAwayTimeout (1 s) passes, and Go's client
// keeps an idle connection open after a GOAWAY, so every graceful stop
// cost a node with peers a second. Instead, once no handler runs and no
// connection is active (HTTP/2 turns a connection idle when its last
// stream's final frame is written) for shutdownQuiet, the connections are
// closed: a message the GOAWAY let through has reached its handler by
// then, and every answer has left.
func (ps *PeerServer) Shutdown(ctx context.Context) {
	if ps.streamLn != nil {
		ps.streamLn.Close() // no new framed connection; those open are closed once quiet
		ps.streams.goAway()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ps.srv.Shutdown(ctx); err != nil {
			ps.srv.Close()
		}
	}()
	ps.waitQuiet(ctx, done)
	ps.srv.Close()
	ps.streams.closeAll()
	<-done
	ps.wg.Wait()
}

// shutdownQuiet is how long nothing must be in flight before Shutdown
// closes the connections.
const shutdownQuiet = 50 * time.Millisecond

// waitQuiet returns once nothing has been in flight for shutdownQuiet,
// ctx ends, or done closes (every HTTP connection closed on its own)
// with no framed connection open.
func (ps *PeerServer) waitQuiet(ctx context.Context, done <-chan struct{}) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	quietSince := time.Now()
	for {
		if ps.inflight.Load() > 0 || ps.conns.active() > 0 {
			quietSince = time.Now()
		} else if time.Since(quietSince) >= shutdownQuiet {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-done:
			if ps.inflight.Load() == 0 && ps.streams.count() == 0 {
				return
			}
			done = nil // HTTP's connections are closed; framed ones wait for quiet
		case <-tick.C:
		}
	}
}

// connStates counts the server's connections in http.StateActive.
type connStates struct {
	mu     sync.Mutex
	states map[net.Conn]http.ConnState
}

func (cs *connStates) track(c net.Conn, st http.ConnState) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.states == nil {
		cs.states = map[net.Conn]http.ConnState{}
	}
	if st == http.StateClosed || st == http.StateHijacked {
		delete(cs.states, c)
		return
	}
	cs.states[c] = st
}

func (cs *connStates) active() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n := 0
	for _, st := range cs.states {
		if st == http.StateActive {
			n++
		}
	}
	return n
}

// counting counts h's calls in flight in n.
func counting(n *atomic.Int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		defer n.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// PeerHandler is the node-to-node endpoints as a handler; the sender of
// each call is peer.Sender of its context (ServePeers sets it).
func (s *Server) PeerHandler(pc PeerConfig) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+peer.PathForward, s.peerOnly(s.serveForward))
	for _, ep := range pc.Endpoints {
		mux.Handle("POST "+ep.Path, s.peerOnly(func(w http.ResponseWriter, r *http.Request, b []byte) error {
			reply, err := ep.Serve(r.Context(), b)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrBadPeerFrame, err)
			}
			return writeReply(w, reply)
		}))
	}
	if pc.RaftRemove != nil {
		mux.Handle("POST "+peer.PathRaftRemove, s.peerOnly(func(w http.ResponseWriter, r *http.Request, b []byte) error {
			return serveRaftRemove(w, r, b, pc.RaftRemove)
		}))
	}
	if pc.Raft != nil {
		mux.Handle("POST "+peer.PathRaftApply, s.peerOnly(func(w http.ResponseWriter, r *http.Request, b []byte) error {
			return s.serveRaftApply(w, r, b, pc.Raft)
		}))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem(w, r, fmt.Errorf("%w: %s %s", ErrNotFound, r.Method, r.URL.Path))
	})
	return mux
}

// peerOnly refuses a call from no authenticated node with 401 before
// reading anything, and reads the bounded body of the others.
func (s *Server) peerOnly(h func(w http.ResponseWriter, r *http.Request, body []byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, ok := peer.Sender(r.Context())
		if !ok {
			problem(w, r, fmt.Errorf("%w: no verified certificate", ErrPeerRefused))
			return
		}
		b, err := readMessage(w, r)
		if err != nil {
			problem(w, r, fmt.Errorf("%w: %v", ErrBadPeerFrame, err))
			return
		}
		if err := h(w, r, b); err != nil {
			s.cfg.Logger.Warn("peer call refused", "path", r.URL.Path, "from", from, "err", err)
			problem(w, r, err)
		}
	})
}

// serveForward serves a request a non-owner handed over. It is served HERE,
// even if this node's ring disagrees about ownership (rings converge; a
// forwarding loop would not), except on a node held after a stop, which
// passes it on once to the key's successor (serveOrRelay, standin.go).
func (s *Server) serveForward(w http.ResponseWriter, r *http.Request, b []byte) error {
	var fr peer.ForwardRequest
	if err := peer.Decode(b, &fr); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPeerFrame, err)
	}
	if err := sameSender(r, fr.From); err != nil {
		return err
	}
	if err := checkPath(fr.Path); err != nil {
		return err
	}
	req := &proxy.Request{Route: fr.Route, Method: fr.Method, Path: fr.Path, RawQuery: fr.RawQuery,
		Header: cleanHeader(http.Header(fr.Header), true), Body: fr.Body}
	out := &peer.ForwardResponse{V: peer.Version, Owner: s.cfg.Node}
	// The forwarding node's connection carries the client's patience: if it
	// gives up, this caller stops waiting (the coalesced fetch goes on).
	resp, err := s.serveOrRelay(r.Context(), req, fr.Relayed)
	if err != nil {
		status, title, retryAfter := problemOf(err)
		out.Err = &peer.RemoteError{Status: status, Title: title, Detail: publicDetail(err), RetryAfter: int64(retryAfter)}
	} else {
		out.Status, out.Header, out.Body = resp.Status, resp.Header, resp.Body
		out.Result, out.Age, out.FreshFor = string(resp.Result), int64(resp.Age), int64(resp.FreshFor)
		out.Detail, out.Attempts = resp.Detail, resp.Attempts
		if resp.Key != "" {
			out.Key, out.Stored = resp.Key, resp.StoredAt.UnixNano()
		}
	}
	return writeForward(w, out)
}

// serveRaftApply applies a follower's entry. Decode bounds m.Data by
// peer.MaxRaftData, so the leader's own decoding of it (the state
// machine's command codec, in Stamp) is bounded too. The sender is the
// node its certificate names, which the message's own From must
// repeat. A proposal the leader refused (a command for
// another node, an unknown route, settings out of bounds) is answered with
// a problem, 403 (400 when malformed), and not logged here: the leader
// counts it and logs it at most once a minute per sender
// (consensus.Config.OnRefused), which a flood must not turn into a log
// line per request. Other errors (not the leader, a timeout) travel in the
// reply, as before.
func (s *Server) serveRaftApply(w http.ResponseWriter, r *http.Request, b []byte, ra RaftApplier) error {
	var m peer.RaftApply
	if err := peer.Decode(b, &m); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPeerFrame, err)
	}
	if err := sameSender(r, m.From); err != nil {
		return err
	}
	from, _ := peer.Sender(r.Context())
	res := &peer.RaftApplyResult{V: peer.Version}
	data, err := ra.ApplyFromPeer(r.Context(), from, m.Data)
	if errors.Is(err, consensus.ErrRefused) {
		problem(w, r, err)
		return nil
	}
	if err != nil {
		res.Err, res.Retry = err.Error(), leaderBusy(err)
	}
	res.Data = data
	return writeMsgpack(w, res)
}

func serveRaftRemove(w http.ResponseWriter, r *http.Request, b []byte, rr RaftRemover) error {
	var m peer.RaftRemove
	if err := peer.Decode(b, &m); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPeerFrame, err)
	}
	if err := sameSender(r, m.From); err != nil {
		return err
	}
	res := &peer.RaftRemoveResult{V: peer.Version}
	if err := rr.RemoveFromPeer(r.Context(), m.ID); err != nil {
		res.Err, res.Retry = err.Error(), leaderBusy(err)
	}
	return writeMsgpack(w, res)
}

// leaderBusy reports whether err says the leader could not act now, so
// the follower that forwarded the command answers its caller 503 +
// Retry-After, as it would for its own commit (peer.ErrLeaderBusy).
func leaderBusy(err error) bool {
	return errors.Is(err, consensus.ErrTimeout) || errors.Is(err, consensus.ErrNoLeader) || errors.Is(err, consensus.ErrNotLeader)
}

// sameSender refuses a message whose own From is not the node its
// connection's certificate names: the certificate is the identity.
func sameSender(r *http.Request, from string) error {
	if sender, _ := peer.Sender(r.Context()); from != sender {
		return fmt.Errorf("%w: message from %q sent by %q", ErrBadPeerFrame, from, sender)
	}
	return nil
}

func writeMsgpack(w http.ResponseWriter, v any) error {
	b, err := peer.Encode(v)
	if err != nil {
		return errors.Join(ErrBadPeerFrame, err)
	}
	return writeReply(w, b)
}

// writeReply writes an encoded reply; nil is an empty 200.
func writeReply(w http.ResponseWriter, b []byte) error {
	if b != nil {
		w.Header().Set("Content-Type", peer.ContentType)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}
