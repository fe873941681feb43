package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/levee/levee/jepsen-lite/relay"
)

// Addresses of the local backend's relays inside node i's namespace. The
// node binds its internal port (node.raft) on loopback behind a relay that
// holds the node's own IP and port, so what peers dial, the address the
// node advertises (node.advertise + the port), reaches the relay; and the
// node's route calls a relay on loopback that dials the demo upstream from
// inside the namespace.
const (
	raftPort       = "8300"
	raftBehind     = "127.0.0.1:" + raftPort // node.raft
	upstreamRelay  = "127.0.0.1:9000"        // the route's upstream host
	upstreamTarget = bridgeIP + ":9000"      // the demo upstream
)

// links holds every node's link shape and the relays that apply them.
//
// Why relays in each node's namespace rather than in the root one (or a
// DNAT to the host): a relay dials from inside the node's namespace, so
// the bytes it carries keep the real source and destination IPs on the
// bridge. The partition and loss rules, which match peer IPs in each
// namespace, go on cutting and dropping exactly as without relays, and
// memberlist, Raft and the forwards see each peer at its own address. The
// relay only moves bytes: the internal port's mutual TLS is end to end,
// certificates naming nodes, not IPs, so nothing about it changes.
//
// Each node's relay sits in front of its own internal port only, yet a
// delayed node is slow both ways: a connection into node n from peer p
// is shaped by n's shape plus p's (relay.Shape.Plus), so p's outgoing
// connections, which meet n's relay, are slow too, as with netem on p's
// interface. A node's upstream relay carries its own shape only.
type links struct {
	mu     sync.Mutex
	shapes map[string]relay.Shape // node → its shape; absent: none
	nodeOf map[string]string      // cluster IP → node
	relays []*relay.Relay
}

func newLinks(ips map[string]string) *links {
	l := &links{shapes: map[string]relay.Shape{}, nodeOf: map[string]string{}}
	for n, ip := range ips {
		l.nodeOf[ip] = n
	}
	return l
}

// set gives node its shape (the zero one removes it).
func (l *links) set(node string, s relay.Shape) error {
	if err := s.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.IsZero() {
		delete(l.shapes, node)
	} else {
		l.shapes[node] = s
	}
	return nil
}

// reset removes every shape.
func (l *links) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.shapes)
}

func (l *links) of(node string) relay.Shape {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shapes[node]
}

// into is the relay.Config.Shape of node's relays: node's shape plus that
// of the peer the connection comes from, if it is a node.
func (l *links) into(node string) func(net.Addr) relay.Shape {
	return func(client net.Addr) relay.Shape {
		own := l.of(node)
		host, _, err := net.SplitHostPort(client.String())
		if err != nil {
			return own
		}
		l.mu.Lock()
		peer, ok := l.nodeOf[host]
		l.mu.Unlock()
		if !ok {
			return own
		}
		return own.Plus(l.of(peer))
	}
}

// start runs node's two relays inside namespace ns: in front of its
// internal port (ip:8300 → 127.0.0.1:8300) and of the upstream
// (127.0.0.1:9000 → the demo upstream).
func (l *links) start(node, ns, ip string) error {
	for _, r := range []struct{ listen, target string }{
		{net.JoinHostPort(ip, raftPort), raftBehind},
		{upstreamRelay, upstreamTarget},
	} {
		if err := l.startOne(node, ns, r.listen, r.target); err != nil {
			return err
		}
	}
	return nil
}

func (l *links) startOne(node, ns, listen, target string) error {
	var ln net.Listener
	err := inNetns(ns, func() (err error) {
		ln, err = net.Listen("tcp", listen)
		return err
	})
	if err != nil {
		return fmt.Errorf("backend: relay %s in %s: %w", listen, ns, err)
	}
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = inNetns(ns, func() error {
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	r, err := relay.New(relay.Config{Listener: ln, Target: target, Dial: dial, Shape: l.into(node)})
	if err != nil {
		ln.Close()
		return err
	}
	r.Start()
	l.mu.Lock()
	l.relays = append(l.relays, r)
	l.mu.Unlock()
	return nil
}

// close stops every relay and forgets every shape; safe to call twice.
func (l *links) close() error {
	l.mu.Lock()
	rs := l.relays
	l.relays = nil
	clear(l.shapes)
	l.mu.Unlock()
	var errs []error
	for _, r := range rs {
		if err := r.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
