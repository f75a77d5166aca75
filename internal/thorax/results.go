package thorax

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/internal/rpc"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// forwardedResult is the holding of a result an agent reported for a command
// this instance does not hold: another instance handed it out, or this one
// did before it restarted or registered again. The lease epoch the agent
// received fences it in Mandible.
func forwardedResult(target, commandID string, epoch int64) *holding {
	return &holding{
		cmd:    &mantisv1.Command{Id: commandID, Target: target, Mode: modePoll, LeaseEpoch: epoch},
		state:  stateStoring,
		stored: make(chan struct{}),
	}
}

// beginForward enters a result to forward into the book, so that a drain
// waits for its store and a report repeated meanwhile waits for the same
// answer. A command that entered the book since is reported as beginReport
// says.
func (b *book) beginForward(target, commandID string, epoch int64) (*holding, error) {
	b.mu.Lock()
	if _, held := b.held[commandID]; !held {
		h := forwardedResult(target, commandID, epoch)
		b.held[commandID] = h
		b.mu.Unlock()
		return h, nil
	}
	b.mu.Unlock()
	return b.beginReport(target, commandID)
}

// endStore records Mandible's answer to a result's store and wakes the
// reports waiting for it.
func (b *book) endStore(h *holding, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h.storeErr = err
	close(h.stored)
}

// storeResult stores a command's result in Mandible, fenced by the lease
// epoch the command was handed out with, and returns Mandible's answer. It
// retries every transient failure until Mandible acknowledges or refuses the
// result, or ctx ends (the drain gave up). Whichever instance id this
// instance holds now goes with it, and for a poll command the target whose
// agent reported it (its certificate's name): Mandible stores a result from
// the command's holder, or from any instance reporting for the command's own
// target.
func (t *Thorax) storeResult(ctx context.Context, h *holding, result *mantisv1.CommandResult) error {
	if out := result.GetOutput(); len(out) > maxResultOutput {
		// An agent above Mandible's limit would lose the whole result; keep
		// the tail, as agents do.
		result = proto.CloneOf(result)
		result.Output = out[len(out)-maxResultOutput:]
		result.OutputTruncated = true
	}
	attrs := []any{"command_id", h.cmd.GetId(), "target", h.cmd.GetTarget(), "lease_epoch", h.cmd.GetLeaseEpoch()}
	bo := t.retryBackoff
	for attempt := 1; ; attempt++ {
		err := t.storeOnce(ctx, h, result)
		switch {
		case err == nil:
			t.logger.DebugContext(ctx, "stored command result", append(attrs, "exit_code", result.GetExitCode(), "attempts", attempt)...)
			return nil
		case status.Code(err) == codes.FailedPrecondition, status.Code(err) == codes.NotFound,
			status.Code(err) == codes.PermissionDenied:
			t.logger.WarnContext(ctx, "mandible refused the result", append(attrs, "err", err)...)
			t.metrics.resultRefused()
			return err
		case !rpc.Retryable(err) && status.Code(err) != codes.Canceled:
			t.logger.ErrorContext(ctx, "mandible refused the result as malformed", append(attrs, "err", err)...)
			t.metrics.resultRefused()
			return err
		case ctx.Err() != nil:
			t.logger.ErrorContext(ctx, "storing command result cut off by the end of the drain", append(attrs, "attempts", attempt, "err", err)...)
			return err
		}
		delay := bo.Next()
		t.logger.WarnContext(ctx, "storing command result failed, retrying", append(attrs, "attempt", attempt, "retry_in", delay, "err", err)...)
		if !backoff.Sleep(ctx, delay) {
			t.logger.ErrorContext(ctx, "storing command result cut off by the end of the drain", append(attrs, "attempts", attempt, "err", err)...)
			return err
		}
	}
}

// storeOnce makes one StoreCommandResult call. Without an instance id
// (registering again) it fails as UNAVAILABLE, to be retried.
func (t *Thorax) storeOnce(ctx context.Context, h *holding, result *mantisv1.CommandResult) error {
	client, id := t.registration()
	if id == "" {
		id = h.instanceID
	}
	if id == "" || client == nil {
		return status.Error(codes.Unavailable, "thorax is registering with mandible")
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := client.StoreCommandResult(callCtx, &mantisv1.StoreCommandResultRequest{
		InstanceId: id,
		CommandId:  h.cmd.GetId(),
		LeaseEpoch: h.cmd.GetLeaseEpoch(),
		Target:     reportingTarget(h.cmd),
		Result:     result,
	})
	return err
}

// reportingTarget is the target a result is reported for: a poll command's
// result comes from its target's agent, whose certificate names it (the
// agents server checked), and may reach Mandible through an instance that does
// not hold the command. A listen command's result comes from this instance's
// own call, and is stored as the holder's.
func reportingTarget(cmd *mantisv1.Command) string {
	if cmd.GetMode() == modePoll {
		return cmd.GetTarget()
	}
	return ""
}

// waitStored waits for the store of h's result that another report started,
// and returns its answer; ctx ending first is UNAVAILABLE, so that the agent
// reports again.
func waitStored(ctx context.Context, h *holding) error {
	select {
	case <-h.stored:
		return h.storeErr
	case <-ctx.Done():
		return status.Error(codes.Unavailable, "the result is still being stored: report it again")
	}
}

// resultAnswer is what an agent hears about its result from Mandible's answer
// err: OK once stored, FAILED_PRECONDITION when Mandible refused it (saying
// why: a stale lease epoch, a command that ended otherwise, a command of
// another target), and UNAVAILABLE
// when it could not be stored yet, so that the agent retries, here or at
// another instance.
func resultAnswer(commandID string, err error) error {
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.FailedPrecondition, codes.NotFound, codes.PermissionDenied:
		return status.Errorf(codes.FailedPrecondition, "mandible refused the result of command %s: %s", commandID, status.Convert(err).Message())
	}
	return status.Errorf(codes.Unavailable, "storing the result of command %s in mandible: %s", commandID, status.Convert(err).Message())
}
