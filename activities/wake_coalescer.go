package activities

import (
	"sync/atomic"
	"time"
)

// WakeCoalescer coalesces the replica's dispatcher wake-ups: it tells the wake-up
// forwarder whether a wake-up is still owed. A claim that starts after a request was
// committed sees that request, so one pending wake-up answers every notification until
// the next claim starts.
type WakeCoalescer struct {
	lastClaim  atomic.Int64 // unix nanos of the latest claim's start
	lastSignal atomic.Int64 // unix nanos of the latest wake-up sent
}

// ClaimStarted records the start of a claim.
func (c *WakeCoalescer) ClaimStarted() {
	if c != nil {
		c.lastClaim.Store(time.Now().UnixNano())
	}
}

// WakeOwed reports whether a notification received now needs a wake-up: none is
// pending since the latest claim started. When it returns true it records the wake-up.
func (c *WakeCoalescer) WakeOwed() bool {
	now := time.Now().UnixNano()
	for {
		last := c.lastSignal.Load()
		if last > c.lastClaim.Load() {
			return false // a wake-up is pending: its claim will see this request
		}
		if c.lastSignal.CompareAndSwap(last, now) {
			return true
		}
	}
}
