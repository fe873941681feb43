package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// ErrUnreachable wraps every failure to get an answer from a peer (dial,
// timeout, refused auth, garbage reply): the caller falls back.
var ErrUnreachable = errors.New("peer: unreachable")

// Kinds of ErrUnreachable, wrapped alongside it. What the peer did with the
// message is known only in the first case: a caller that would repeat a
// write must tell them apart.
var (
	// ErrNotSent: the message provably never reached the peer's handler:
	// no connection could be opened (refused, no route, dial timeout, no
	// address), or the peer refused it before reading it (401, 404, 405).
	// The peer cannot have acted on it.
	ErrNotSent = errors.New("peer: not sent")
	// ErrTimeout: the peer did not answer in time. It may have acted on the
	// message, and may still be acting on it.
	ErrTimeout = errors.New("peer: no answer in time")
	// ErrRefused, wrapped with ErrNotSent: the peer's host answered the
	// connection with a reset (ECONNREFUSED), or reset it while it was
	// being opened (ECONNRESET in the TLS handshake: the listening socket
	// had queued it, then its process died): nothing listens on its port,
	// so its process is gone (killed, crashed, stopping), not merely out of
	// reach, which shows as no route or a dial timeout instead (soak run 5
	// at 599.7 s: two survivors of a killed owner met a reset mid-handshake
	// and each fetched the key itself instead of meeting at its successor).
	// A connection closed mid-handshake (EOF) is the same.
	ErrRefused = errors.New("peer: connection refused")
	// ErrConnReset: the connection the message went out on was reset or
	// closed by the peer's end before its answer came: its process died
	// with the call in flight, most likely (a killed node's open
	// connections are reset). The peer may have acted on the message.
	ErrConnReset = errors.New("peer: connection reset")
)

// ErrLeaderBusy wraps a Raft leader's answer that it could not act now
// (no leader, leadership lost mid-commit, the commit timed out): the
// outcome may be unknown, and the caller may retry.
var ErrLeaderBusy = errors.New("peer: the leader could not act now")

type senderKey struct{}

// WithSender is ctx carrying the name of the node a peer message came
// from, as its verified certificate names it; the internal port's server
// sets it for every connection.
func WithSender(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, senderKey{}, name)
}

// Sender is the authenticated sender of the peer message being served;
// false when the connection was not authenticated.
func Sender(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(senderKey{}).(string)
	return name, ok && name != ""
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Self is this node's name, sent in every message. Required.
	Self string
	// Timeout bounds one call. Default 25s (cluster.forward_timeout).
	Timeout time.Duration
	// Dial opens an authenticated connection to a peer's internal port:
	// package node gives connmux.Dial over mutual TLS. Default: plain TCP,
	// which only this package's tests use (a node's internal port accepts
	// nothing but mutual TLS).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// HTTP2 speaks HTTP/2 with prior knowledge over Dial's connections
	// (the internal port's peer server speaks it): one connection per peer
	// carries a thousand calls at once, instead of a connection and a TLS
	// handshake each. Default false: HTTP/1.1.
	HTTP2 bool
	// DialStream, when set, opens a framed connection to a peer's internal
	// port (connmux.Dial with connmux.KindStream): calls then travel as
	// frames over one connection per peer (frame.go), and over HTTP only to
	// a peer that answers no frames (a node of an older release), for a
	// minute at a time. Default nil: HTTP only.
	DialStream func(ctx context.Context, addr string) (net.Conn, error)
	// Wrap, when set, wraps the keep-alive transport (tests cut links).
	// Default nil.
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Client makes peer calls over a pooled keep-alive transport.
type Client struct {
	cfg     ClientConfig
	tr      *http.Transport
	streams *streams          // nil without DialStream
	rt      http.RoundTripper // streams or tr, or Wrap's of it
}

// NewClient builds a Client; it does no I/O.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 25 * time.Second
	}
	dial := (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	if cfg.Dial != nil {
		dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return cfg.Dial(ctx, addr) }
	}
	tr := &http.Transport{
		// The handshake is part of the dial: bound both together, as a
		// dial (ErrNotSent) and not as a timeout.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, dialTimeout)
			defer cancel()
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, &net.OpError{Op: "dial", Net: network, Err: err}
			}
			return c, nil
		},
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
	}
	if cfg.HTTP2 {
		// The connections are TLS already (Dial); to net/http they are
		// plain TCP, hence "unencrypted" HTTP/2.
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
		tr.HTTP2 = &http.HTTP2Config{PingTimeout: 5 * time.Second, SendPingTimeout: 15 * time.Second}
		// A burst to a peer with no connection yet must not open one
		// connection (and one handshake) per call: the first few carry
		// them all, a thousand streams each.
		tr.MaxConnsPerHost = 4
	}
	c := &Client{cfg: cfg, tr: tr, rt: tr}
	if cfg.DialStream != nil {
		c.streams = newStreams(cfg.DialStream, tr)
		c.rt = c.streams
	}
	if cfg.Wrap != nil {
		c.rt = cfg.Wrap(c.rt)
	}
	return c
}

// dialTimeout bounds opening a connection to a peer, TLS handshake
// included.
const dialTimeout = 2 * time.Second

// Close drops idle connections and closes the framed ones; calls still
// waiting on those fail.
func (c *Client) Close() {
	if c.streams != nil {
		c.streams.Close()
	}
	c.tr.CloseIdleConnections()
}

// Forward asks the node at addr to serve req. A *RemoteError is the owner's
// real answer; any error wrapping ErrUnreachable means "serve it yourself".
func (c *Client) Forward(ctx context.Context, addr string, req *ForwardRequest) (*ForwardResponse, error) {
	req.V, req.From = Version, c.cfg.Self
	var resp ForwardResponse
	if err := c.call(ctx, addr, PathForward, req, &resp); err != nil {
		return nil, err
	}
	if resp.Err != nil {
		return &resp, resp.Err
	}
	return &resp, nil
}

// Replicate pushes one entry to the node at addr.
func (c *Client) Replicate(ctx context.Context, addr string, e *Entry) error {
	e.V, e.From = Version, c.cfg.Self
	return c.call(ctx, addr, PathReplicate, e, nil)
}

// Invalidate hands writes' tombstones to the node at addr; it returns once
// the node applied them.
func (c *Client) Invalidate(ctx context.Context, addr string, m *Invalidate) error {
	m.V, m.From = Version, c.cfg.Self
	return c.call(ctx, addr, PathInvalidate, m, nil)
}

// Lookup asks the node at addr for its entry of req.Key. found is false
// when the node holds no usable entry; an error wraps ErrUnreachable.
func (c *Client) Lookup(ctx context.Context, addr string, req *LookupRequest) (e *Entry, found bool, err error) {
	req.V, req.From = Version, c.cfg.Self
	var resp LookupResponse
	if err := c.call(ctx, addr, PathLookup, req, &resp); err != nil {
		return nil, false, err
	}
	return resp.Entry, resp.Found, nil
}

// Renew asks the owner at addr which of m's near-cached copies are still its
// current answers; the result has one duration per copy (0: not current).
// An error wraps ErrUnreachable: a node that predates renewal answers 404.
func (c *Client) Renew(ctx context.Context, addr string, m *Renew) ([]time.Duration, error) {
	m.V, m.From = Version, c.cfg.Self
	var res RenewResult
	if err := c.call(ctx, addr, PathRenew, m, &res); err != nil {
		return nil, err
	}
	if len(res.FreshFor) != len(m.Copies) {
		return nil, fmt.Errorf("%w: %s: renew answered %d copies of %d", ErrUnreachable, addr, len(res.FreshFor), len(m.Copies))
	}
	out := make([]time.Duration, len(res.FreshFor))
	for i, ns := range res.FreshFor {
		out[i] = time.Duration(max(ns, 0))
	}
	return out, nil
}

// RaftApply hands an encoded command to the leader at addr and returns the
// leader's result bytes.
func (c *Client) RaftApply(ctx context.Context, addr string, data []byte) ([]byte, error) {
	var res RaftApplyResult
	if err := c.call(ctx, addr, PathRaftApply, &RaftApply{V: Version, From: c.cfg.Self, Data: data}, &res); err != nil {
		return nil, err
	}
	if res.Err != "" {
		return nil, leaderError(res.Err, res.Retry)
	}
	return res.Data, nil
}

// RaftRemove asks the leader at addr to remove server id and waits for the
// removal to commit.
func (c *Client) RaftRemove(ctx context.Context, addr, id string) error {
	var res RaftRemoveResult
	if err := c.call(ctx, addr, PathRaftRemove, &RaftRemove{V: Version, From: c.cfg.Self, ID: id}, &res); err != nil {
		return err
	}
	if res.Err != "" {
		return leaderError(res.Err, res.Retry)
	}
	return nil
}

// leaderError is a leader's error text as an error, wrapping ErrLeaderBusy
// when the leader said a retry may succeed.
func leaderError(text string, retry bool) error {
	if retry {
		return fmt.Errorf("%w: %s", ErrLeaderBusy, text)
	}
	return errors.New(text)
}

// call sends in to addr's path and decodes the reply into out. It hands
// the request straight to the transport, not through an http.Client: a
// Client's Timeout costs every call a timer, a cancel context and their
// bookkeeping (net/http's setRequestCancel), where one context deadline
// bounds the exchange and the reply's body alike (issue 15).
func (c *Client) call(ctx context.Context, addr, path string, in any, out versioned) error {
	body, err := Encode(in)
	if err != nil {
		return fmt.Errorf("peer: encode: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w: %v", ErrUnreachable, ErrNotSent, err)
	}
	hreq.Header.Set("Content-Type", ContentType)
	hresp, err := c.rt.RoundTrip(hreq)
	if err != nil {
		return sendError(addr, err)
	}
	defer hresp.Body.Close()
	b, err := readReply(hresp)
	if err != nil {
		return fmt.Errorf("%w: %s: reading reply: %v", ErrUnreachable, addr, err)
	}
	switch hresp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusNotFound, http.StatusMethodNotAllowed:
		// Refused before any handler read the message.
		return fmt.Errorf("%w: %w: %s answered %s", ErrUnreachable, ErrNotSent, addr, hresp.Status)
	default:
		return fmt.Errorf("%w: %s answered %s", ErrUnreachable, addr, hresp.Status)
	}
	if out == nil {
		return nil
	}
	if err := Decode(b, out); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, addr, err)
	}
	return nil
}

// readReply reads a reply's body, at most MaxMessage+1 bytes (Decode
// refuses more).
func readReply(hresp *http.Response) ([]byte, error) {
	return ReadBody(io.LimitReader(hresp.Body, MaxMessage+1), hresp.ContentLength)
}

// ReadBody reads body to its end in one allocation when its sender
// declared a length of at most MaxPresized bytes (a forward's request or
// answer, as a rule), and as io.ReadAll does otherwise: a peer that
// declares more than it sends must not make the reader allocate it.
func ReadBody(body io.Reader, declared int64) ([]byte, error) {
	if declared < 0 || declared > MaxPresized {
		return io.ReadAll(body)
	}
	b := make([]byte, declared)
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	return b, nil
}

// MaxPresized bounds what ReadBody allocates on a peer's word alone.
const MaxPresized = 256 << 10

// sendError classifies a failed HTTP exchange with addr. Only a failed dial
// proves the message never left: once a connection carries it, the peer
// may act on it whatever happens to the answer (a pooled connection that
// turns out dead before anything was written is retried by net/http
// itself, so it does not end up here).
func sendError(addr string, err error) error {
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &op) && op.Op == "dial" && (errors.Is(err, syscall.ECONNREFUSED) || connClosed(err)):
		return fmt.Errorf("%w: %w: %w: %s: %v", ErrUnreachable, ErrNotSent, ErrRefused, addr, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("%w: %w: %s: %v", ErrUnreachable, ErrNotSent, addr, err)
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w: %s: %v", ErrUnreachable, ErrTimeout, addr, err)
	case connClosed(err):
		return fmt.Errorf("%w: %w: %s: %v", ErrUnreachable, ErrConnReset, addr, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrUnreachable, addr, err)
}

// connClosed reports an error of a connection the other end reset or
// closed.
func connClosed(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
