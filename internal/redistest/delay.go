package redistest

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// Delay is a TCP proxy on 127.0.0.1 that forwards to a target address
// and holds every chunk of bytes for a fixed time in each direction: a
// Redis that far away (a round trip of twice the delay, plus the
// loopback's), with no limit on bandwidth. It stands for a Redis in
// another region in tests of timeouts and coalescing.
type Delay struct {
	// Addr is the proxy's "127.0.0.1:port" address, for clients.
	Addr string

	ln    net.Listener
	delay time.Duration
	quit  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// StartDelay starts a Delay to target adding delay each way; tb.Cleanup
// closes it and every connection through it.
func StartDelay(tb testing.TB, target string, delay time.Duration) *Delay {
	tb.Helper()
	d, err := NewDelay(target, delay)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(d.close)
	return d
}

// NewDelay starts a Delay to target adding delay each way, outside a
// test (the bench harness's far-redis scenarios); Close stops it.
func NewDelay(target string, delay time.Duration) (*Delay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("delay proxy: %w", err)
	}
	d := &Delay{Addr: ln.Addr().String(), ln: ln, delay: delay, quit: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	d.wg.Add(1)
	go d.accept(target)
	return d, nil
}

// Close stops the proxy: the listener and every connection through it,
// waiting for its goroutines. It may be called more than once.
func (d *Delay) Close() { d.close() }

// accept proxies each connection accepted until the listener closes.
func (d *Delay) accept(target string) {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !d.track(c, u) {
			return
		}
		d.wg.Add(2)
		go d.pipe(c, u)
		go d.pipe(u, c)
	}
}

// track records conns to close with the proxy, or closes them and
// reports false when the proxy is closed already.
func (d *Delay) track(conns ...net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.quit:
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	default:
	}
	for _, c := range conns {
		d.conns[c] = struct{}{}
	}
	return true
}

// chunk is bytes read from one side, due on the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies from src to dst, each chunk delay after it was read, in
// order. When either side fails, both are closed.
func (d *Delay) pipe(src, dst net.Conn) {
	defer d.wg.Done()
	// Enough room that reading never waits for the writer while bytes
	// are in transit.
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if wait := time.Until(c.due); wait > 0 {
				select {
				case <-time.After(wait):
				case <-d.quit:
					return
				}
			}
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case q <- chunk{buf[:n], time.Now().Add(d.delay)}:
			case <-done:
				err = net.ErrClosed
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	_ = src.Close()
	_ = dst.Close()
}

// close stops the proxy: the listener and every connection through it.
// It may be called more than once.
func (d *Delay) close() {
	d.once.Do(func() {
		d.mu.Lock()
		close(d.quit)
		for c := range d.conns {
			_ = c.Close()
		}
		d.mu.Unlock()
		_ = d.ln.Close()
		d.wg.Wait()
	})
}
