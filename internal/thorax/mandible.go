package thorax

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/internal/rpc"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// register asks Mandible for an instance id, retrying with jittered backoff
// until Mandible answers or ctx ends. Only INVALID_ARGUMENT (a configuration
// Mandible will never accept) stops it early.
func (t *Thorax) register(ctx context.Context) error {
	client, _ := t.registration()
	bo := t.registerBackoff
	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := client.RegisterInstance(callCtx, &mantisv1.RegisterInstanceRequest{
			Name:    t.cfg.Name,
			Version: buildVersion(),
		})
		cancel()
		if err == nil && resp.GetInstanceId() != "" {
			t.mu.Lock()
			t.setInstanceIDLocked(resp.GetInstanceId())
			t.mu.Unlock()
			timeout := resp.GetHeartbeatTimeout().AsDuration()
			t.logger.InfoContext(ctx, "registered with mandible",
				"instance_id", resp.GetInstanceId(), "name", t.cfg.Name, "heartbeat_timeout", timeout)
			if timeout > 0 && 2*t.cfg.Heartbeat.Interval.Duration > timeout {
				t.logger.WarnContext(ctx, "heartbeat.interval is more than half of mandible's heartbeat timeout: the instance may be declared dead between beats",
					"heartbeat_interval", t.cfg.Heartbeat.Interval.Duration, "heartbeat_timeout", timeout)
			}
			t.wakeFetch()
			return nil
		}
		if err == nil {
			err = status.Error(codes.Internal, "mandible issued an empty instance id")
		}
		if status.Code(err) == codes.InvalidArgument {
			return fmt.Errorf("registering with mandible: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := bo.Next()
		t.logger.WarnContext(ctx, "registering with mandible failed, retrying",
			"attempt", attempt, "retry_in", delay, "address", t.cfg.Mandible.Address, "err", err)
		if !backoff.Sleep(ctx, delay) {
			return ctx.Err()
		}
	}
}

// heartbeatLoop heartbeats every heartbeat.interval (and at once when asked)
// until ctx ends, and registers again when Mandible declares the instance
// dead. run is the serving context: re-registration stops with it.
func (t *Thorax) heartbeatLoop(ctx, run context.Context) {
	ticker := time.NewTicker(t.cfg.Heartbeat.Interval.Duration)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-t.beat:
		case id := <-t.dead:
			t.reregister(run, id)
			continue
		}
		client, id := t.registration()
		if id == "" {
			continue
		}
		draining := t.book.isDraining()
		targets := t.book.connectedTargets(time.Now())
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := client.Heartbeat(callCtx, &mantisv1.HeartbeatRequest{
			InstanceId:  id,
			PollTargets: targets,
			Draining:    draining,
		})
		cancel()
		switch {
		case err == nil:
			if draining {
				t.drainHeardOnce.Do(func() { close(t.drainHeard) })
			}
			t.noteListenTargets(ctx, resp.GetListenTargets())
			t.cancelCommands(ctx, resp.GetCancelledCommandIds())
		case status.Code(err) == codes.FailedPrecondition:
			t.reregister(run, id)
		case ctx.Err() == nil:
			t.logger.WarnContext(ctx, "heartbeat failed", "instance_id", id, "err", err)
		}
	}
}

// reportDead tells the heartbeat loop that Mandible answered a call made
// under id with FAILED_PRECONDITION: the instance was declared dead.
func (t *Thorax) reportDead(id string) {
	select {
	case t.dead <- id:
	default:
	}
}

// reregister replaces an instance id Mandible declared dead with a new one.
// The commands queued under the dead id are dropped: Mandible has already
// failed their deployments and reassigned their targets. Commands an agent
// runs finish, and their results go to Mandible under the new id, fenced by
// their lease epoch; Mandible refuses those it settled as lost, saying so. A
// draining instance does not register again.
func (t *Thorax) reregister(ctx context.Context, deadID string) {
	t.mu.Lock()
	if t.instanceID != deadID {
		t.mu.Unlock()
		return // already replaced
	}
	t.setInstanceIDLocked("")
	t.mu.Unlock()
	dropped := t.book.forsake(deadID)
	if t.book.isDraining() || ctx.Err() != nil {
		t.logger.WarnContext(ctx, "mandible declared the draining instance dead", "instance_id", deadID, "dropped_commands", len(dropped))
		return
	}
	t.logger.WarnContext(ctx, "mandible declared the instance dead: registering again", "instance_id", deadID, "dropped_commands", len(dropped))
	if err := t.register(ctx); err != nil && ctx.Err() == nil {
		t.logger.ErrorContext(ctx, "registering again failed", "err", err)
	}
}

// noteListenTargets logs the listen-mode targets Mandible assigns to the
// instance when they change.
func (t *Thorax) noteListenTargets(ctx context.Context, targets []string) {
	targets = slices.Sorted(slices.Values(targets))
	t.mu.Lock()
	changed := !slices.Equal(t.listenTargets, targets)
	t.listenTargets = targets
	t.mu.Unlock()
	if changed {
		t.logger.InfoContext(ctx, "listen targets assigned", "targets", targets)
	}
}

// beatNow asks the heartbeat loop for a heartbeat at once.
func (t *Thorax) beatNow() {
	select {
	case t.beat <- struct{}{}:
	default:
	}
}

// callWithRetry runs call until it succeeds, fails for good, window passes
// or ctx ends, and returns its last error. rpc.Retryable decides which failures
// are worth repeating.
func (t *Thorax) callWithRetry(ctx context.Context, window time.Duration, call func(context.Context) error) error {
	bo := t.retryBackoff
	giveUp := time.Now().Add(window)
	for {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := call(callCtx)
		cancel()
		if err == nil || !rpc.Retryable(err) || ctx.Err() != nil || time.Now().After(giveUp) {
			return err
		}
		if !backoff.Sleep(ctx, bo.Next()) {
			return err
		}
	}
}

// Limits of what Mandible stores.
const (
	// maxResultOutput is the most output Mandible accepts in one result.
	maxResultOutput = 1 << 20
	// maxReason is the longest redispatch reason Mandible accepts.
	maxReason = 4096
)

// redispatch asks Mandible to dispatch a held command again after a failed
// hand-off. Mandible owns the retry budget and may refuse; either way the
// command leaves this instance.
func (t *Thorax) redispatch(ctx context.Context, h *holding, reason string) {
	client, _ := t.registration()
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "")
	}
	var resp *mantisv1.ScheduleRedispatchResponse
	err := t.callWithRetry(ctx, retryWindow, func(ctx context.Context) error {
		var err error
		resp, err = client.ScheduleRedispatch(ctx, &mantisv1.ScheduleRedispatchRequest{
			InstanceId: h.instanceID,
			CommandId:  h.cmd.GetId(),
			LeaseEpoch: h.cmd.GetLeaseEpoch(),
			Reason:     reason,
		})
		return err
	})
	attrs := []any{"command_id", h.cmd.GetId(), "target", h.cmd.GetTarget(), "lease_epoch", h.cmd.GetLeaseEpoch(), "reason", reason}
	switch {
	case err != nil:
		t.logger.WarnContext(ctx, "asking mandible for another dispatch failed", append(attrs, "err", err)...)
	case resp.GetScheduled():
		t.logger.InfoContext(ctx, "mandible scheduled another dispatch",
			append(attrs, "next_attempt_at", resp.GetNextAttemptAt().AsTime())...)
	default:
		t.logger.WarnContext(ctx, "mandible refused another dispatch", append(attrs, "refusal", resp.GetRefusal())...)
	}
}

// release hands unrun commands back to Mandible, grouped by the instance id
// they were claimed under, so that another instance can claim them.
func (t *Thorax) release(ctx context.Context, hs []*holding, why string) {
	if len(hs) == 0 {
		return
	}
	client, _ := t.registration()
	byInstance := map[string][]*mantisv1.CommandLease{}
	for _, h := range hs {
		byInstance[h.instanceID] = append(byInstance[h.instanceID], h.lease())
	}
	for id, leases := range byInstance {
		var released int32
		err := t.callWithRetry(ctx, retryWindow, func(ctx context.Context) error {
			resp, err := client.ReleaseCommands(ctx, &mantisv1.ReleaseCommandsRequest{InstanceId: id, Commands: leases})
			released = resp.GetReleased()
			return err
		})
		if err != nil {
			t.logger.WarnContext(ctx, "handing commands back to mandible failed",
				"instance_id", id, "commands", len(leases), "why", why, "err", err)
			continue
		}
		t.logger.InfoContext(ctx, "handed commands back to mandible",
			"instance_id", id, "commands", len(leases), "released", released, "why", why)
	}
}
