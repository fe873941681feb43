package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ReshapeEvery is the longest a waiting chunk goes without asking its
// link's shape again: a heal to zero reaches bytes already queued within
// it.
const ReshapeEvery = 50 * time.Millisecond

// piecesPerSecond sizes a bandwidth-limited write: a piece is 1/20 s of
// the bandwidth, so a limited stream leaves in 50 ms steps, not in one
// burst per chunk.
const piecesPerSecond = 20

// Defaults of Config.
const (
	DefaultChunkSize   = 32 << 10
	DefaultQueueLen    = 64
	DefaultDialTimeout = 5 * time.Second
)

// acceptBackoff is the pause after an accept error other than a closed
// listener (EMFILE: out of file descriptors), as net/http's Server does.
const acceptBackoff = 50 * time.Millisecond

// ErrConfig wraps every invalid Config.
var ErrConfig = errors.New("relay: bad config")

// Config wires a Relay.
type Config struct {
	// Listener accepts the connections to relay; the Relay owns it and
	// closes it on Close. Required.
	Listener net.Listener
	// Target is the host:port every accepted connection is relayed to.
	// Required.
	Target string
	// Dial opens the connection to Target, once per accepted connection,
	// after the accept (so a client of a target that is down sees its
	// connection accepted and then closed, not refused). Default: a
	// net.Dialer with a DefaultDialTimeout timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Shape is the shape of the link from client (an accepted connection's
	// remote address) now. It is asked as chunks leave, from many
	// goroutines at once. Default nil: no shaping.
	Shape func(client net.Addr) Shape
	// ChunkSize is the most bytes read at once. Default DefaultChunkSize.
	ChunkSize int
	// QueueLen is how many chunks each direction of a connection holds
	// while they wait out their delay; a full queue stops reading, so the
	// sender feels TCP backpressure. Default DefaultQueueLen.
	QueueLen int
	// Rand draws each chunk's jitter, uniform in [0, 1). Default
	// math/rand/v2's Float64.
	Rand func() float64
	// Log receives accept and dial errors. Default nil: discarded.
	Log *slog.Logger
}

// Stats are a Relay's counters since New.
type Stats struct {
	Accepted   int64 // connections accepted
	DialErrors int64 // accepted connections closed because Target did not answer
	Open       int64 // connections being relayed now
	Bytes      int64 // bytes written, both directions
}

// Relay accepts connections on Config.Listener and relays each to
// Config.Target, shaped by Config.Shape.
type Relay struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	startOnce, closeOnce sync.Once
	closeErr             error

	accepted, dialErrors, open, bytes atomic.Int64
}

// New checks cfg and fills its defaults; it does no I/O.
func New(cfg Config) (*Relay, error) {
	if cfg.Listener == nil || cfg.Target == "" {
		return nil, errors.Join(ErrConfig, errors.New("relay: Listener and Target are required"))
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: DefaultDialTimeout}).DialContext
	}
	if cfg.Shape == nil {
		cfg.Shape = func(net.Addr) Shape { return Shape{} }
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Relay{cfg: cfg, log: log.With("relay", cfg.Listener.Addr().String(), "target", cfg.Target),
		ctx: ctx, cancel: cancel}, nil
}

// Addr is the listener's address.
func (r *Relay) Addr() net.Addr { return r.cfg.Listener.Addr() }

// Start accepts connections until Close. Calling it again does nothing.
func (r *Relay) Start() {
	r.startOnce.Do(func() {
		if r.ctx.Err() != nil {
			return // closed before it started
		}
		r.wg.Add(1)
		go r.serve()
	})
}

// Close stops accepting, closes every relayed connection and waits for
// every goroutine. Safe to call twice.
func (r *Relay) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		r.closeErr = r.cfg.Listener.Close()
		r.wg.Wait()
	})
	return r.closeErr
}

// Stats returns the counters.
func (r *Relay) Stats() Stats {
	return Stats{Accepted: r.accepted.Load(), DialErrors: r.dialErrors.Load(),
		Open: r.open.Load(), Bytes: r.bytes.Load()}
}

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.cfg.Listener.Accept()
		if err != nil {
			if r.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			r.log.Warn("accept", "err", err)
			if !sleep(r.ctx.Done(), acceptBackoff) {
				return
			}
			continue
		}
		r.accepted.Add(1)
		r.wg.Add(1)
		go r.handle(c)
	}
}

// handle dials the target for client and relays both directions until
// both have ended, either side fails, or the Relay closes.
func (r *Relay) handle(client net.Conn) {
	defer r.wg.Done()
	r.open.Add(1)
	defer r.open.Add(-1)
	dctx, cancel := context.WithTimeout(r.ctx, DefaultDialTimeout)
	target, err := r.cfg.Dial(dctx, "tcp", r.cfg.Target)
	cancel()
	if err != nil {
		r.dialErrors.Add(1)
		r.log.Debug("dial target", "client", client.RemoteAddr().String(), "err", err)
		client.Close()
		return
	}
	done := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(done)
			client.Close()
			target.Close()
		})
	}
	unwatch := context.AfterFunc(r.ctx, stop)
	defer unwatch()
	from := client.RemoteAddr()
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); r.pipe(client, target, from, done, stop) }()
	go func() { defer pipes.Done(); r.pipe(target, client, from, done, stop) }()
	pipes.Wait()
	stop()
}

// chunk is bytes read from one side, waiting to be written to the other.
type chunk struct {
	data []byte
	at   time.Time // when it was read
	u    float64   // its jitter draw
}

// pipe carries src's bytes to dst, shaped as the link from client is. At
// src's end of stream dst is half-closed, so the other direction may go
// on; any error ends the whole connection (stop), a reset by a reset.
func (r *Relay) pipe(src, dst net.Conn, client net.Addr, done <-chan struct{}, stop func()) {
	q := make(chan chunk, r.cfg.QueueLen)
	var readErr error
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		readErr = r.read(src, q, done)
	}()
	err := r.write(dst, q, client, done)
	if err != nil {
		stop()
	}
	reader.Wait() // q is closed: readErr is set
	switch {
	case err != nil:
	case errors.Is(readErr, io.EOF):
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			return
		}
		stop()
	case errors.Is(readErr, syscall.ECONNRESET):
		// A reset reaches the other side as a reset, not as a clean end:
		// the demo upstream's "reset" fault must look the same through a
		// relay (SetLinger(0) makes Close send RST).
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		stop()
	default:
		stop()
	}
}

// read queues src's bytes until its end (io.EOF) or an error, then closes
// q. It stops queueing when done closes.
func (r *Relay) read(src net.Conn, q chan<- chunk, done <-chan struct{}) error {
	defer close(q)
	buf := make([]byte, r.cfg.ChunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c := chunk{data: bytes.Clone(buf[:n]), at: time.Now(), u: r.cfg.Rand()}
			select {
			case q <- c:
			case <-done:
				return net.ErrClosed
			}
		}
		if err != nil {
			return err
		}
	}
}

// errStopped ends a writer whose connection was stopped while it waited.
var errStopped = errors.New("relay: connection stopped")

// write takes q's chunks in order and writes each to dst once its delay
// has passed, paced to the link's bandwidth.
func (r *Relay) write(dst net.Conn, q <-chan chunk, client net.Addr, done <-chan struct{}) error {
	shape := func() Shape { return r.cfg.Shape(client) }
	var p pacer
	for c := range q {
		if !waitDelay(c, shape, done) {
			return errStopped
		}
		if err := p.write(dst, c.data, shape, done); err != nil {
			return err
		}
		r.bytes.Add(int64(len(c.data)))
	}
	return nil
}

// waitDelay sleeps until c's delay under the link's shape has passed since
// it was read, asking the shape again every ReshapeEvery; false when done
// closed first.
func waitDelay(c chunk, shape func() Shape, done <-chan struct{}) bool {
	for {
		left := time.Until(c.at.Add(shape().delay(c.u)))
		if left <= 0 {
			return true
		}
		if !sleep(done, min(left, ReshapeEvery)) {
			return false
		}
	}
}

// pacer spreads writes over time so a direction carries at most the
// shape's bandwidth: next is when the next piece may leave.
type pacer struct {
	next time.Time
}

func (p *pacer) write(dst net.Conn, data []byte, shape func() Shape, done <-chan struct{}) error {
	for len(data) > 0 {
		bw := shape().Bandwidth
		if bw <= 0 {
			p.next = time.Time{}
			_, err := dst.Write(data)
			return err
		}
		n := min(len(data), max(1, int(bw/piecesPerSecond)))
		start := time.Now()
		if p.next.After(start) {
			if !sleep(done, p.next.Sub(start)) {
				return errStopped
			}
			start = p.next
		}
		if _, err := dst.Write(data[:n]); err != nil {
			return err
		}
		p.next = start.Add(time.Duration(int64(n) * int64(time.Second) / bw))
		data = data[n:]
	}
	return nil
}

// sleep waits d; false when done closed first.
func sleep(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-t.C:
		return true
	}
}
