package thorax

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/internal/broker"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// brokerBackoff spaces the attempts to reach the broker and its queues.
var brokerBackoff = backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// setInstanceIDLocked records the instance id Mandible issued ("" while
// registering again) and tells the broker consumers, whose tags carry it.
// Callers hold mu.
func (t *Thorax) setInstanceIDLocked(id string) {
	if t.instanceID == id {
		return
	}
	t.instanceID = id
	close(t.idChanged)
	t.idChanged = make(chan struct{})
}

// registrationWatch returns the instance id and a channel closed when it
// changes.
func (t *Thorax) registrationWatch() (string, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.instanceID, t.idChanged
}

// consume runs the broker consumers of the three priority queues until ctx
// ends, reporting the broker's health to the polling loop: healthy while the
// consumers run, unhealthy (the short fallback polling interval) while the
// broker cannot be reached or its queues do not exist yet. It reconnects with
// jittered backoff, and consumes again with new consumer tags whenever
// Mandible issues the instance a new id.
//
// The consumer tags are thorax-{instance_id}-{uuid}-{high|normal|low}: one
// uuid per instance id, kept across reconnections.
func (t *Thorax) consume(ctx context.Context) {
	defer t.SetBrokerHealthy(false)
	handler := broker.NudgeHandler(countedNudges{p: nudgeProcessor{t}, metrics: t.metrics}, t.logger)
	bo := brokerBackoff
	var tagID, tag string
	// attempt counts the tries since the consumers last ran (0: they just
	// stopped).
	for attempt := 1; ctx.Err() == nil; attempt++ {
		id, changed := t.registrationWatch()
		if id == "" {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		if id != tagID {
			tagID, tag = id, fmt.Sprintf("thorax-%s-%s", id, uuid.NewString())
		}
		session, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
				cancel()
			case <-session.Done():
			}
		}()
		err := broker.ConsumePriorities(session, broker.ConsumerOptions{
			Queue:     t.cfg.Queue.Queue,
			Name:      fmt.Sprintf("thorax %s %s", t.cfg.Name, id),
			TagPrefix: tag,
			Prefetch:  t.cfg.Queue.PrefetchCount,
			Handler:   handler,
			Logger:    t.logger,
			Consuming: func() {
				attempt, bo = 0, brokerBackoff
				t.SetBrokerHealthy(true)
			},
		})
		reregistered := session.Err() != nil && ctx.Err() == nil
		cancel()
		t.SetBrokerHealthy(false)
		switch {
		case ctx.Err() != nil:
			return
		case reregistered:
			t.logger.InfoContext(ctx, "instance id changed: consuming again with new consumer tags", "old_instance_id", id)
			continue
		case errors.Is(err, broker.ErrTopologyMissing):
			t.logger.InfoContext(ctx, "waiting for mandible to declare the broker topology", "attempt", attempt, "err", err)
		case attempt == 0:
			t.logger.WarnContext(ctx, "broker consumers stopped: polling at the fallback interval until they are back", "err", err)
		default:
			t.logger.WarnContext(ctx, "reaching the broker failed, retrying", "attempt", attempt, "err", err)
		}
		if !backoff.Sleep(ctx, bo.Next()) {
			return
		}
	}
}

// nudgeProcessor processes command nudges for a Thorax instance: a nudge is
// the hint that one command is waiting, and processing it is claiming that
// command through FetchNow. The claim in Mandible's database makes sure a
// command runs once even when a nudge and a poll race for it.
type nudgeProcessor struct{ t *Thorax }

// Process claims the nudged command and hands it off. A command claimed or
// finished already, or one this instance does not serve, is not an error: its
// nudge is acknowledged. An instance draining or at capacity is busy, not
// failing (broker.ErrBusy): the nudge is acknowledged and polling claims the
// command. FetchNow failing otherwise (Mandible unreachable) is a failed
// attempt under the retry rules.
func (p nudgeProcessor) Process(ctx context.Context, n broker.Nudge) error {
	t := p.t
	if _, err := uuid.Parse(n.CommandID); err != nil {
		return fmt.Errorf("%w: command_id %q is not a command id", broker.ErrUnprocessable, n.CommandID)
	}
	// A claim cut off half-way could commit without Thorax knowing it holds
	// the command: let it finish (FetchNow bounds the call).
	cmds, err := t.FetchNow(context.WithoutCancel(ctx), n.CommandID)
	switch {
	case errors.Is(err, ErrNotRegistered):
		// Registering again: the consumers stop and consume again under the
		// new id, and the broker requeues this message when they do.
		select {
		case <-ctx.Done():
		case <-time.After(callTimeout):
		}
		return err
	case errors.Is(err, ErrAtCapacity), errors.Is(err, ErrDraining):
		return fmt.Errorf("%w: %w", broker.ErrBusy, err)
	case status.Code(err) == codes.InvalidArgument:
		return fmt.Errorf("%w: mandible refused the claim: %v", broker.ErrUnprocessable, err)
	case err != nil:
		return err
	case len(cmds) > 0:
		t.logger.DebugContext(ctx, "claimed nudged command", "command_id", n.CommandID, "target", cmds[0].GetTarget())
		return nil
	}
	known, err := t.commandKnown(ctx, n.CommandID)
	switch {
	case err != nil:
		t.logger.WarnContext(ctx, "nudged command was not claimed and mandible could not say whether it exists: acknowledging, polling claims it if it does",
			"command_id", n.CommandID, "err", err)
		return nil
	case !known:
		return fmt.Errorf("%w: mandible has no command %s", broker.ErrUnprocessable, n.CommandID)
	}
	t.logger.DebugContext(ctx, "nudged command was claimed or finished already, or belongs to a target this instance does not serve",
		"command_id", n.CommandID)
	return nil
}

// GiveUp asks Mandible to schedule another dispatch of the command before its
// nudge is dead-lettered (seed "Retry Behaviour", step 4). The claims failed,
// so no lease is held: the call names the command at
// unclaimedLeaseEpoch, and Mandible fences it, refusing when the command was
// claimed or finished since, or a newer delivery replaced it. Mandible owns
// the budget and may refuse; the refusal is logged. Either way the nudge then
// goes to mantis.dlq.
func (p nudgeProcessor) GiveUp(ctx context.Context, n broker.Nudge, cause error) {
	t := p.t
	attrs := []any{"command_id", n.CommandID, "target", n.Target, "cause", cause}
	client, id := t.registration()
	if id == "" || client == nil {
		t.logger.WarnContext(ctx, "cannot ask mandible for another dispatch while registering: the command stays queued for polling to claim", attrs...)
		return
	}
	reason := fmt.Sprintf("the nudge of command %s failed on its broker retry: %v", n.CommandID, cause)
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "")
	}
	var resp *mantisv1.ScheduleRedispatchResponse
	err := t.callWithRetry(context.WithoutCancel(ctx), giveUpWindow, func(ctx context.Context) error {
		var err error
		resp, err = client.ScheduleRedispatch(ctx, &mantisv1.ScheduleRedispatchRequest{
			InstanceId: id,
			CommandId:  n.CommandID,
			LeaseEpoch: unclaimedLeaseEpoch,
			Reason:     reason,
		})
		return err
	})
	switch {
	case status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.NotFound:
		t.logger.InfoContext(ctx, "mandible refused another dispatch of the nudged command", append(attrs, "err", err)...)
	case err != nil:
		t.logger.WarnContext(ctx, "asking mandible for another dispatch of the nudged command failed: it stays queued for polling to claim", append(attrs, "err", err)...)
	case resp.GetScheduled():
		t.logger.InfoContext(ctx, "mandible scheduled another dispatch of the nudged command",
			append(attrs, "next_attempt_at", resp.GetNextAttemptAt().AsTime())...)
	default:
		t.logger.WarnContext(ctx, "mandible refused another dispatch of the nudged command", append(attrs, "refusal", resp.GetRefusal())...)
	}
}

// Lease epochs with a meaning of their own in ScheduleRedispatch.
const (
	// unclaimedLeaseEpoch names a command nobody claimed (schema's
	// UnclaimedLeaseEpoch): a claim moves a command's epoch to 1 or more.
	unclaimedLeaseEpoch = 0
	// probeLeaseEpoch is an epoch no claim reaches, so a call fenced by it
	// changes nothing.
	probeLeaseEpoch = math.MaxInt64
)

// commandKnown reports whether Mandible has the command. Mandible has no call
// that only asks, so this uses ScheduleRedispatch fenced at probeLeaseEpoch,
// which no command carries: Mandible changes nothing, and answers NOT_FOUND
// for a command it does not have and FAILED_PRECONDITION for one that is not
// running at that epoch.
func (t *Thorax) commandKnown(ctx context.Context, commandID string) (bool, error) {
	client, id := t.registration()
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	_, err := client.ScheduleRedispatch(callCtx, &mantisv1.ScheduleRedispatchRequest{
		InstanceId: id,
		CommandId:  commandID,
		LeaseEpoch: probeLeaseEpoch,
		Reason:     "thorax checking that a nudged command exists (no claim reaches this lease epoch)",
	})
	switch status.Code(err) {
	case codes.NotFound:
		return false, nil
	case codes.FailedPrecondition, codes.OK:
		return true, nil
	}
	return false, err
}
