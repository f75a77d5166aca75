package thorax

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// holdState is where a held command is between its claim and its end.
type holdState int

const (
	// stateQueued: waiting for its agent, in a poll-mode target's queue or
	// the listen-mode backlog. Only queued commands are handed back unrun.
	stateQueued holdState = iota
	// stateHanded: its agent has it (a listen call runs, or a poll-mode agent
	// took it and owes a result).
	stateHanded
	// stateStoring: its result is on its way to Mandible.
	stateStoring
)

// holding is one command this instance holds, under the instance id it was
// claimed with: a release or redispatch is fenced by that id and the lease
// epoch, so a command claimed before a re-registration keeps its original
// holder. A result is fenced by the lease epoch alone.
type holding struct {
	cmd        *mantisv1.Command
	instanceID string
	state      holdState
	// deadline is when a poll-mode agent that took the command is overdue
	// with its result.
	deadline time.Time
	// cancelAsked says its agent was asked to cancel it: Mandible repeats a
	// cancellation on every heartbeat until the command ends.
	cancelAsked bool
	// stored is closed when the store of its result ends, with storeErr
	// Mandible's answer: a report repeated meanwhile answers the same.
	stored   chan struct{}
	storeErr error
}

func (h *holding) lease() *mantisv1.CommandLease {
	return &mantisv1.CommandLease{CommandId: h.cmd.GetId(), LeaseEpoch: h.cmd.GetLeaseEpoch()}
}

// pollTarget is a poll-mode target as its agent's polls show it.
type pollTarget struct {
	queue commandQueue
	// wake is closed (and replaced) when commands join the queue or the
	// instance starts draining, so waiting polls look again.
	wake chan struct{}
	// polling counts the polls of this target in progress.
	polling int
	// lastSeen is when a poll last began or ended; the target counts as
	// connected for window after it.
	lastSeen time.Time
	window   time.Duration
	// cancels are commands its agent took that were cancelled since: the next
	// poll tells the agent to kill them.
	cancels []string
}

func (p *pollTarget) connected(now time.Time) bool {
	return p.polling > 0 || now.Sub(p.lastSeen) < p.window
}

func (p *pollTarget) signal() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// Errors of book.beginReport, mapped to gRPC codes by the agent service.
var (
	errNotHeld      = errors.New("command is not held by this instance")
	errOtherTarget  = errors.New("command belongs to another target")
	errNotHanded    = errors.New("command was not handed to a poll-mode agent")
	errReportedOnce = errors.New("result already reported")
)

// book is what the instance holds: every claimed command from its claim until
// its result is stored, it is handed back, or Mandible is asked to dispatch it
// again. One mutex guards it all; every operation is short.
type book struct {
	mu       sync.Mutex
	capacity int
	held     map[string]*holding
	// reserved is room promised to fetches in flight.
	reserved    int
	listen      commandQueue
	listenReady chan struct{} // capacity 1: the backlog may have work
	targets     map[string]*pollTarget
	draining    bool
	drainCh     chan struct{} // closed when draining starts
	// changed is closed (and replaced) whenever a command leaves the book.
	changed chan struct{}
}

func newBook(capacity int) *book {
	return &book{
		capacity:    capacity,
		held:        map[string]*holding{},
		listenReady: make(chan struct{}, 1),
		targets:     map[string]*pollTarget{},
		drainCh:     make(chan struct{}),
		changed:     make(chan struct{}),
	}
}

// reserve promises room for up to want commands to a fetch and returns how
// much; 0 when the book is full or draining.
func (b *book) reserve(want int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.draining {
		return 0
	}
	n := min(want, b.capacity-len(b.held)-b.reserved)
	if n <= 0 {
		return 0
	}
	b.reserved += n
	return n
}

// admit enters the commands a fetch claimed under instanceID, ending the
// reservation of n. While draining nothing is admitted: the commands come
// back to be handed back.
func (b *book) admit(n int, instanceID string, cmds []*mantisv1.Command) (refused []*holding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserved -= n
	for _, c := range cmds {
		h := &holding{cmd: c, instanceID: instanceID, stored: make(chan struct{})}
		if b.draining {
			refused = append(refused, h)
			continue
		}
		if old, dup := b.held[c.GetId()]; dup && old.instanceID != "" {
			continue // Mandible answered a command twice; it is held once.
		}
		// (A forwarded result of an older epoch may be on its way meanwhile:
		// the claim replaces it in the book, and its store still ends.)
		b.held[c.GetId()] = h
		if c.GetMode() == modeListen {
			b.listen.push(h)
			select {
			case b.listenReady <- struct{}{}:
			default:
			}
			continue
		}
		t := b.target(c.GetTarget())
		t.queue.push(h)
		t.signal()
	}
	return refused
}

// target returns the named poll-mode target, creating it. Callers hold mu.
func (b *book) target(name string) *pollTarget {
	t, ok := b.targets[name]
	if !ok {
		t = &pollTarget{wake: make(chan struct{})}
		b.targets[name] = t
	}
	return t
}

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

// takePoll hands up to n of target's queued commands to its agent, each owing
// its result by deadline(cmd), with the commands its agent must kill. When there
// are none it returns a channel that is closed when that may have changed;
// draining says no command will come.
func (b *book) takePoll(target string, n int, deadline func(*mantisv1.Command) time.Time) (taken []*holding, cancels []string, wake <-chan struct{}, draining bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.draining {
		return nil, nil, nil, true
	}
	t := b.target(target)
	cancels, t.cancels = t.cancels, nil
	taken = t.queue.pop(n)
	for _, h := range taken {
		h.state = stateHanded
		h.deadline = deadline(h.cmd)
	}
	return taken, cancels, t.wake, false
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

// beginReport moves a command a poll-mode agent took to storing.
func (b *book) beginReport(target, commandID string) (*holding, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[commandID]
	switch {
	case !ok:
		return nil, errNotHeld
	case h.cmd.GetTarget() != target || h.cmd.GetMode() == modeListen:
		return nil, errOtherTarget
	case h.state == stateQueued:
		return nil, errNotHanded
	case h.state == stateStoring:
		return h, errReportedOnce
	}
	h.state = stateStoring
	return h, nil
}

// markStoring moves a handed command to storing.
func (b *book) markStoring(h *holding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h.state = stateStoring
}

// finish removes a command from the book.
func (b *book) finish(h *holding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[h.cmd.GetId()] == h {
		delete(b.held, h.cmd.GetId())
		b.notifyChanged()
	}
}

func (b *book) notifyChanged() {
	close(b.changed)
	b.changed = make(chan struct{})
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
