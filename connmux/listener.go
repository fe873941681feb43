package connmux

import (
	"net"
	"sync"
	"time"
)

// listener is one protocol's side of the Mux: Accept returns the
// connections routed to it.
type listener struct {
	m    *Mux
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func (m *Mux) newListener() *listener {
	return &listener{m: m, ch: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives c to whoever calls Accept next, or closes it if this
// listener or the Mux closes first, or nobody accepts within wait (a
// protocol that is not running, such as Raft on a node whose Raft store is
// damaged, must not collect connections).
func (l *listener) hand(c net.Conn, muxDone <-chan struct{}, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l.ch <- c:
		return
	case <-l.done:
	case <-muxDone:
	case <-t.C:
	}
	c.Close()
}

// Accept returns the next connection routed here.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, ErrClosed
	case <-l.m.done:
		return nil, ErrClosed
	}
}

// Close stops this listener only; the Mux and its other listeners go on.
func (l *listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the Mux's advertised address.
func (l *listener) Addr() net.Addr { return l.m.advertise }
