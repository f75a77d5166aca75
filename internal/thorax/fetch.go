package thorax

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// SetBrokerHealthy switches the polling tick: polling.interval while the
// broker delivers nudges (healthy), polling.fallback_interval while it does
// not. An instance starts on the fallback interval, since no nudge arrives
// until a broker consumer says otherwise.
func (t *Thorax) SetBrokerHealthy(healthy bool) {
	t.mu.Lock()
	changed := t.brokerHealthy != healthy
	t.brokerHealthy = healthy
	t.mu.Unlock()
	if !changed {
		return
	}
	t.logger.Info("polling interval switched", "broker_healthy", healthy, "interval", t.pollInterval())
	select {
	case t.intervalChanged <- struct{}{}:
	default:
	}
}

// pollInterval returns the polling tick in force.
func (t *Thorax) pollInterval() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.brokerHealthy {
		return t.cfg.Polling.Interval.Duration
	}
	return t.cfg.Polling.FallbackInterval.Duration
}

// wakeFetch asks the polling loop to fetch at once.
func (t *Thorax) wakeFetch() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// FetchNow claims pending commands at once, outside the polling tick, hands
// them to their agents and returns them. With commandIDs it claims only those
// (the ids a broker nudge carries) and returns none that another instance
// claimed first or that do not exist. It fails with ErrDraining,
// ErrNotRegistered or ErrAtCapacity without calling Mandible, and with
// Mandible's error when the claim fails.
func (t *Thorax) FetchNow(ctx context.Context, commandIDs ...string) ([]*mantisv1.Command, error) {
	cmds, _, err := t.fetch(ctx, commandIDs)
	return cmds, err
}

// fetchLoop claims commands on the polling tick, at once when woken, and again
// straight away while Mandible fills every answer, until ctx ends.
func (t *Thorax) fetchLoop(ctx context.Context) {
	// The first fetch comes at once: registering wakes the loop.
	timer := time.NewTimer(t.pollInterval())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.intervalChanged:
			timer.Reset(t.pollInterval())
			continue
		case <-t.wake:
		case <-timer.C:
		}
		for ctx.Err() == nil {
			_, full, err := t.fetch(ctx, nil)
			if err != nil && ctx.Err() == nil {
				switch err {
				case ErrAtCapacity, ErrNotRegistered, ErrDraining:
					t.logger.DebugContext(ctx, "polling skipped", "reason", err.Error())
				default:
					t.logger.WarnContext(ctx, "fetching pending commands failed", "err", err)
				}
			}
			if !full || err != nil {
				break
			}
		}
		timer.Reset(t.pollInterval())
	}
}

// fetch claims commands from Mandible and hands them off. full says Mandible
// answered with as many as asked, so more may be waiting.
func (t *Thorax) fetch(ctx context.Context, commandIDs []string) (cmds []*mantisv1.Command, full bool, err error) {
	defer func() { t.metrics.fetchedCommands(len(cmds), err) }()
	if t.book.isDraining() {
		return nil, false, ErrDraining
	}
	client, id := t.registration()
	if id == "" {
		return nil, false, ErrNotRegistered
	}
	want := maxFetch
	if len(commandIDs) > 0 {
		want = min(len(commandIDs), maxFetch)
	}
	n := t.book.reserve(want)
	if n == 0 {
		if t.book.isDraining() {
			return nil, false, ErrDraining
		}
		return nil, false, ErrAtCapacity
	}
	// The claim outlives a drain that starts meanwhile: Mandible may commit it
	// whatever Thorax does, so its answer is awaited and what it claimed handed
	// back below, rather than left held by an instance that stops.
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	resp, err := client.FetchPendingCommands(callCtx, &mantisv1.FetchPendingCommandsRequest{
		InstanceId:  id,
		PollTargets: t.book.connectedTargets(time.Now()),
		MaxCommands: int32(n),
		CommandIds:  commandIDs,
	})
	cancel()
	if err != nil {
		t.book.admit(n, id, nil)
		if status.Code(err) == codes.FailedPrecondition {
			t.reportDead(id)
		}
		return nil, false, fmt.Errorf("fetching pending commands: %w", err)
	}
	valid := make([]*mantisv1.Command, 0, len(resp.GetCommands()))
	var invalid []*holding
	for _, c := range resp.GetCommands() {
		if problem := commandProblem(c); problem != "" {
			t.logger.ErrorContext(ctx, "mandible handed over a command thorax cannot hand to an agent",
				"command_id", c.GetId(), "target", c.GetTarget(), "problem", problem)
			invalid = append(invalid, &holding{cmd: c, instanceID: id})
			continue
		}
		valid = append(valid, c)
	}
	if refused := t.book.admit(n, id, valid); len(refused) > 0 {
		t.release(context.WithoutCancel(ctx), refused, "claimed while draining")
		valid = nil
	}
	for _, h := range invalid {
		t.redispatch(context.WithoutCancel(ctx), h, "thorax cannot hand the command to an agent: "+commandProblem(h.cmd))
	}
	if len(resp.GetCommands()) > 0 {
		t.logger.DebugContext(ctx, "claimed commands", "instance_id", id, "commands", len(resp.GetCommands()))
	}
	return valid, len(resp.GetCommands()) >= n, nil
}

// commandProblem says what keeps Thorax from handing c to an agent, or "".
func commandProblem(c *mantisv1.Command) string {
	switch {
	case c.GetId() == "":
		return "id is empty"
	case c.GetTarget() == "":
		return "target is empty"
	case c.GetMode() == modeListen && c.GetListenAddress() == "":
		return "listen_address is empty for a listen-mode target"
	case c.GetMode() != modeListen && c.GetMode() != modePoll:
		return fmt.Sprintf("mode %q is neither poll nor listen", c.GetMode())
	}
	return ""
}

// sweepLoop hands back the commands of poll-mode targets whose agents
// stopped polling, and asks for another dispatch of those whose agents took
// them and never reported, until run ends. work bounds the Mandible calls.
func (t *Thorax) sweepLoop(run, work context.Context) {
	ticker := time.NewTicker(t.sweepInterval)
	defer ticker.Stop()
	for {
		select {
		case <-run.Done():
			return
		case <-ticker.C:
		}
		overdue, stranded := t.book.sweep(time.Now())
		t.release(work, stranded, "poll agent stopped polling")
		for _, h := range overdue {
			t.redispatch(work, h, fmt.Sprintf("poll agent for %s took the command and reported no result within %s",
				h.cmd.GetTarget(), t.resultWait(h.cmd)))
		}
	}
}

// resultWait is how long after a hand-off the command's result may take: its
// timeout, at most maxCommandTimeout so that adding the grace cannot overflow.
func (t *Thorax) resultWait(c *mantisv1.Command) time.Duration {
	d := min(c.GetTimeout().AsDuration(), maxCommandTimeout)
	if d <= 0 {
		d = t.untimedLimit
	}
	return d + t.resultGrace
}
