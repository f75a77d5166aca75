package thorax

// The hand-off of held commands to agents: listen-mode commands to the caller loop,
// poll-mode commands to their target's long polls, and back when a poll could not
// deliver them.

import (
	"context"
	"slices"
	"time"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// nextListen waits for a listen-mode command and marks it handed. It returns
// false once the instance drains or ctx ends.
func (b *book) nextListen(ctx context.Context) (*holding, bool) {
	for {
		b.mu.Lock()
		if b.draining {
			b.mu.Unlock()
			return nil, false
		}
		if hs := b.listen.pop(1); len(hs) == 1 {
			hs[0].state = stateHanded
			if b.listen.len() > 0 {
				select {
				case b.listenReady <- struct{}{}:
				default:
				}
			}
			b.mu.Unlock()
			return hs[0], true
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-b.drainCh:
			return nil, false
		case <-b.listenReady:
		}
	}
}

// beginPoll records a poll of target that waits up to wait, and reports
// whether the target was not connected before it.
func (b *book) beginPoll(target string, window time.Duration, now time.Time) (newlyConnected bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.target(target)
	newlyConnected = !t.connected(now)
	t.polling++
	t.lastSeen = now
	t.window = window
	return newlyConnected
}

func (b *book) endPoll(target string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.target(target)
	t.polling--
	t.lastSeen = now
}

// takePoll hands up to n of target's queued commands to its agent's session,
// each owing its result by deadline(cmd), with the commands its agent must kill.
// When there are none it returns a channel that is closed when that may have
// changed; draining says no command will come.
func (b *book) takePoll(target, session string, n int, deadline func(*mantisv1.Command) time.Time) (taken []*holding, cancels []string, wake <-chan struct{}, draining bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.draining {
		return nil, nil, nil, true
	}
	t := b.target(target)
	cancels, t.cancels = t.cancels, nil
	taken = t.queue.pop(n)
	if len(taken) > 0 && t.handed == nil {
		t.handed = map[string]*holding{}
	}
	for _, h := range taken {
		h.state = stateHanded
		h.deadline = deadline(h.cmd)
		h.session = session
		t.handed[h.cmd.GetId()] = h
	}
	return taken, cancels, t.wake, false
}

// rehandLost is called as a poll of target begins. With held, the complete list
// of commands the polling agent session holds, every command polls of that session
// took that held does not name goes back to the head of the target's queue (an
// answer that ended before it reached the agent), to be handed again; while
// draining it is returned for release instead. A command the agent was asked to
// cancel is not handed again: it waits for its deadline as before. Without held
// (nil) it only forgets commands that left stateHanded.
func (b *book) rehandLost(target, session string, held map[string]bool) (rehanded int, release []*holding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.targets[target]
	if !ok {
		return 0, nil
	}
	var lost []*holding
	for id, h := range t.handed {
		switch {
		case b.held[id] != h || h.state != stateHanded:
			delete(t.handed, id)
		case held != nil && h.session == session && !held[id] && !h.cancelAsked:
			delete(t.handed, id)
			lost = append(lost, h)
		}
	}
	release = b.unhandLocked(lost)
	return len(lost) - len(release), release
}

// recancel queues cancellations a poll could not deliver for the target's next poll.
func (b *book) recancel(target string, ids []string) {
	if len(ids) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.target(target)
	t.cancels = append(ids, t.cancels...)
}

// unhand puts commands a poll could not deliver back at the head of their
// target's queue, or returns them for release when the instance is draining.
func (b *book) unhand(hs []*holding) (release []*holding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unhandLocked(hs)
}

// unhandLocked is unhand for a caller that holds mu.
func (b *book) unhandLocked(hs []*holding) (release []*holding) {
	for _, h := range hs {
		if b.draining {
			delete(b.held, h.cmd.GetId())
			release = append(release, h)
			continue
		}
		h.state = stateQueued
		h.deadline = time.Time{}
		t := b.target(h.cmd.GetTarget())
		t.queue.pushFront(h)
		t.signal()
	}
	if len(release) > 0 {
		b.notifyChanged()
	}
	return release
}

// connectedTargets returns the poll-mode targets whose agents poll now or
// polled within their window, sorted.
func (b *book) connectedTargets(now time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for name, t := range b.targets {
		if t.connected(now) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
