package peer

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
)

// Token derives the peer auth token from the cluster secret, so the secret
// itself never crosses the wire. An empty secret gives an empty token:
// auth is off, which package node warns about.
func Token(secret string) string {
	if secret == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("levee-peer-auth-v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// Authorized reports whether r carries the cluster's token.
func Authorized(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	got := r.Header.Get(HeaderAuth)
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Self is this node's name, sent in every call. Required.
	Self string
	// Secret is cluster.secret. Default "": no auth.
	Secret string
	// Timeout bounds one call. Default 25s (cluster.forward_timeout).
	Timeout time.Duration
	// Transport carries the calls. Default: a keep-alive pool tuned for a
	// few peers.
	Transport http.RoundTripper
}

// Client makes peer calls over a pooled keep-alive transport.
type Client struct {
	cfg   ClientConfig
	token string
	hc    *http.Client
}

// NewClient builds a Client; it does no I/O.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 25 * time.Second
	}
	if cfg.Transport == nil {
		cfg.Transport = &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 128,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	return &Client{cfg: cfg, token: Token(cfg.Secret), hc: &http.Client{Transport: cfg.Transport, Timeout: cfg.Timeout}}
}

// Close drops idle connections.
func (c *Client) Close() {
	if t, ok := c.cfg.Transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
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

// RaftApply hands an encoded command to the leader at addr and returns the
// leader's result bytes.
func (c *Client) RaftApply(ctx context.Context, addr string, data []byte) ([]byte, error) {
	var res RaftApplyResult
	if err := c.call(ctx, addr, PathRaftApply, &RaftApply{V: Version, From: c.cfg.Self, Data: data}, &res); err != nil {
		return nil, err
	}
	if res.Err != "" {
		return nil, errors.New(res.Err)
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
		return errors.New(res.Err)
	}
	return nil
}

func (c *Client) call(ctx context.Context, addr, path string, in any, out versioned) error {
	body, err := Encode(in)
	if err != nil {
		return fmt.Errorf("peer: encode: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w: %v", ErrUnreachable, ErrNotSent, err)
	}
	hreq.Header.Set("Content-Type", ContentType)
	hreq.Header.Set(HeaderFrom, c.cfg.Self)
	if c.token != "" {
		hreq.Header.Set(HeaderAuth, c.token)
	}
	hresp, err := c.hc.Do(hreq)
	if err != nil {
		return sendError(addr, err)
	}
	defer hresp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(hresp.Body, MaxMessage+1))
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

// sendError classifies a failed HTTP exchange with addr. Only a failed dial
// proves the message never left: once a connection carries it, the peer
// may act on it whatever happens to the answer (a pooled connection that
// turns out dead before anything was written is retried by net/http
// itself, so it does not end up here).
func sendError(addr string, err error) error {
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("%w: %w: %s: %v", ErrUnreachable, ErrNotSent, addr, err)
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w: %s: %v", ErrUnreachable, ErrTimeout, addr, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrUnreachable, addr, err)
}
