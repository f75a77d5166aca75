package broker

import (
	"net"
	"sync"
)

// heldWritesMax is how many bytes a hold keeps before it writes them anyway.
const heldWritesMax = 64 << 10

// heldWrites is a broker connection whose writes a publisher can hold back over a
// batch of nudges and send together: amqp091-go flushes after every publish, so a
// batch of 500 nudges would otherwise leave in 500 writes (a system call and a TLS
// record each). Outside a hold, writes pass straight through.
type heldWrites struct {
	net.Conn

	mu   sync.Mutex
	held bool
	buf  []byte
}

// Write sends p, or keeps it while the writes are held (writing what it keeps once
// that reaches heldWritesMax).
func (c *heldWrites) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held {
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= heldWritesMax {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// hold keeps the writes from here until release.
func (c *heldWrites) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = true
}

// release sends what the hold kept, in one write, and lets writes through again. Its
// error is that of the kept writes, which their callers were told had succeeded.
func (c *heldWrites) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	return c.flushLocked()
}

func (c *heldWrites) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}
