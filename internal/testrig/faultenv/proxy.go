package faultenv

import (
	"net"
	"sync"
	"testing"
	"time"
)

// proxyDialTimeout bounds a proxy's dial of one upstream.
const proxyDialTimeout = 2 * time.Second

// Link is one kind of network link (Thorax to Mandible, agent to Thorax) made of TCP
// proxies that share its faults: a delay added to every byte, or a cut that resets
// the open connections and refuses new ones until Restore.
type Link struct {
	Name string

	mu    sync.Mutex
	delay time.Duration
	cut   bool
	conns map[net.Conn]struct{}
}

// NewLink returns a healthy link.
func NewLink(name string) *Link {
	return &Link{Name: name, conns: map[net.Conn]struct{}{}}
}

// Delay adds d to every chunk forwarded from now on, both ways.
func (l *Link) Delay(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delay = d
}

// Cut resets every open connection of the link and refuses new ones.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for c := range l.conns {
		_ = c.Close()
	}
}

// Restore ends the delay and the cut.
func (l *Link) Restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut, l.delay = false, 0
}

func (l *Link) state() (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delay, l.cut
}

// track registers c, or reports false when the link is cut.
func (l *Link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Link) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
}

// Proxy listens on a free loopback port and forwards each connection to the first of
// upstreams that accepts it, starting one further along each time, so that a client
// of several replicas fails over when one is gone. It returns the listening address
// and stops when the test ends.
func (l *Link) Proxy(t testing.TB, upstreams ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultenv: proxy for %s: %v", l.Name, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			start := next
			next++
			wg.Add(1)
			go func() { defer wg.Done(); l.serve(c, upstreams, start) }()
		}
	}()
	return ln.Addr().String()
}

func (l *Link) serve(client net.Conn, upstreams []string, start int) {
	defer client.Close()
	if !l.track(client) {
		return
	}
	defer l.untrack(client)
	var upstream net.Conn
	for i := range upstreams {
		c, err := net.DialTimeout("tcp", upstreams[(start+i)%len(upstreams)], proxyDialTimeout)
		if err == nil {
			upstream = c
			break
		}
	}
	if upstream == nil {
		return
	}
	defer upstream.Close()
	if !l.track(upstream) {
		return
	}
	defer l.untrack(upstream)
	done := make(chan struct{}, 2)
	go func() { l.pump(upstream, client); done <- struct{}{} }()
	go func() { l.pump(client, upstream); done <- struct{}{} }()
	<-done
	// One side ended: end the other, as a cut or a closed peer would.
	_ = client.Close()
	_ = upstream.Close()
	<-done
}

// chunk is bytes read from one side, due on the other side at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pump copies src to dst, holding each chunk for the link's delay at the time it
// was read.
func (l *Link) pump(dst, src net.Conn) {
	queue := make(chan chunk, 4096)
	go func() {
		defer close(queue)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				delay, _ := l.state()
				queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			<-time.After(wait)
		}
		if _, err := dst.Write(c.data); err != nil {
			_ = src.Close()
			for range queue {
			}
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
