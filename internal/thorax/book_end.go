package thorax

// How held commands end other than by their result: overdue or stranded ones found by
// the sweep, those of a forsaken instance id, cancelled ones, and the drain.

import (
	"context"
	"slices"
	"time"
)

// sweep removes what can no longer end normally: commands poll-mode agents
// took and owe a result for past their deadline (overdue), and queued
// commands of targets whose agents stopped polling (stranded).
func (b *book) sweep(now time.Time) (overdue, stranded []*holding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, h := range b.held {
		if h.state == stateHanded && !h.deadline.IsZero() && now.After(h.deadline) {
			delete(b.held, id)
			overdue = append(overdue, h)
		}
	}
	for name, t := range b.targets {
		if t.connected(now) {
			continue
		}
		for _, h := range t.queue.pop(t.queue.len()) {
			delete(b.held, h.cmd.GetId())
			stranded = append(stranded, h)
		}
		delete(b.targets, name)
	}
	if len(overdue)+len(stranded) > 0 {
		b.notifyChanged()
	}
	return overdue, stranded
}

// forsake drops the queued commands claimed under instanceID, which Mandible
// declared dead: they belong to an incarnation that no longer holds anything.
func (b *book) forsake(instanceID string) []*holding {
	b.mu.Lock()
	defer b.mu.Unlock()
	of := func(h *holding) bool { return h.instanceID == instanceID }
	dropped := b.listen.removeIf(of)
	for _, t := range b.targets {
		dropped = append(dropped, t.queue.removeIf(of)...)
	}
	for _, h := range dropped {
		delete(b.held, h.cmd.GetId())
	}
	if len(dropped) > 0 {
		b.notifyChanged()
	}
	return dropped
}

// cancel drops the named commands that no agent took yet, and returns them
// with the listen-mode ones an agent is running. Commands a poll-mode agent
// took are queued for its next poll to kill, and stay until it reports
// (Mandible refuses the result).
func (b *book) cancel(ids []string) (dropped, running []*holding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cancelled := map[string]bool{}
	for _, id := range ids {
		if h, ok := b.held[id]; ok {
			cancelled[id] = true
			if h.state == stateHanded && !h.cancelAsked {
				h.cancelAsked = true
				if h.cmd.GetMode() == modeListen {
					running = append(running, h)
				} else {
					t := b.target(h.cmd.GetTarget())
					t.cancels = append(t.cancels, id)
					t.signal()
				}
			}
		}
	}
	if len(cancelled) == 0 {
		return nil, running
	}
	of := func(h *holding) bool { return cancelled[h.cmd.GetId()] }
	dropped = b.listen.removeIf(of)
	for _, t := range b.targets {
		dropped = append(dropped, t.queue.removeIf(of)...)
	}
	for _, h := range dropped {
		delete(b.held, h.cmd.GetId())
	}
	if len(dropped) > 0 {
		b.notifyChanged()
	}
	return dropped, running
}

// startDrain stops all hand-offs and returns the queued commands, which no
// agent took, removed from the book for handing back.
func (b *book) startDrain() []*holding {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.draining {
		return nil
	}
	b.draining = true
	close(b.drainCh)
	unhanded := b.listen.pop(b.listen.len())
	for _, t := range b.targets {
		unhanded = append(unhanded, t.queue.pop(t.queue.len())...)
		t.signal()
	}
	for _, h := range unhanded {
		delete(b.held, h.cmd.GetId())
	}
	b.notifyChanged()
	return unhanded
}

func (b *book) isDraining() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.draining
}

// waitEmpty waits until the book holds nothing or ctx ends.
func (b *book) waitEmpty(ctx context.Context) error {
	for {
		b.mu.Lock()
		n, changed := len(b.held), b.changed
		b.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// remaining returns the ids of the commands still held, sorted.
func (b *book) remaining() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.held))
	for id := range b.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
