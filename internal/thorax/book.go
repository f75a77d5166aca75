package thorax

import (
	"errors"
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
	// session is the agent process whose poll took it, "" when that poll named
	// none.
	session string
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
	// handed are the commands polls handed to the target, by id; entries that left
	// stateHanded are pruned at the next poll (book.rehandLost).
	handed map[string]*holding
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
