package consensus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// TLS makes Raft's transport mutual TLS: the server side accepts only
// peers whose certificate it trusts, the client side presents this node's
// (clustertls.Identity builds both from cluster.secret).
type TLS struct {
	Server *tls.Config
	Client *tls.Config
}

// handshakeTimeout bounds a peer's TLS handshake: a connection that does
// not authenticate in this time is dropped, so an unauthenticated client
// cannot hold Raft's connection handlers.
const handshakeTimeout = 10 * time.Second

// tlsStream is raft.StreamLayer over mutual TLS, as rqlite's tcp layer and
// Consul's RPC listener wrap theirs: raft sees plain net.Conns, every byte
// of which has crossed an authenticated, encrypted connection.
type tlsStream struct {
	net.Listener
	advertise net.Addr
	cfg       TLS
	// authenticated: the Listener hands over connections that completed
	// their handshake already (Config.Listen).
	authenticated bool
}

// listenTLS binds bind and advertises advertise (nil: the bound address,
// which must then be a specific IP, as raft's TCP transport requires).
func listenTLS(bind string, advertise net.Addr, cfg TLS) (*tlsStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("local bind address %v is not advertisable: set an advertise address", advertise)
	}
	return &tlsStream{Listener: ln, advertise: advertise, cfg: cfg}, nil
}

// Accept returns the next connection, which completes its TLS handshake
// (verifying the peer's certificate) on first use, within
// handshakeTimeout.
func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil || s.authenticated {
		return c, err
	}
	return &serverConn{Conn: tls.Server(c, s.cfg.Server)}, nil
}

// Addr is the advertised address.
func (s *tlsStream) Addr() net.Addr { return s.advertise }

// Dial connects to a peer and completes the handshake within timeout.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.cfg.Client)
}

// serverConn handshakes on its first Read or Write. raft's accept loop
// must not block on one peer's handshake, so it is not done in Accept.
type serverConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		defer cancel()
		if c.err = c.Conn.HandshakeContext(ctx); c.err != nil {
			c.err = errors.Join(errors.New("consensus: raft peer refused"), c.err)
		}
	})
	return c.err
}

func (c *serverConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *serverConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
