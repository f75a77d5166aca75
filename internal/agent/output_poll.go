package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/mantis-deploy/mantis/internal/rpc"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

const (
	// outputQueue bounds the batches of live output a poll agent holds for Thorax;
	// beyond it batches are dropped.
	outputQueue = 256
	// outputReportTimeout bounds one ReportOutput call.
	outputReportTimeout = 5 * time.Second
	// outputRetryDelay is the wait before the one retry of a failed ReportOutput.
	outputRetryDelay = 200 * time.Millisecond
)

// outputBatch is live output of one command waiting for Thorax.
type outputBatch struct {
	cmd    *mantisv1.Command
	chunks []*mantisv1.OutputChunk
}

// pollOutput is the OutputSink of a poll agent: it reports the chunks to Thorax in
// order, one call at a time, from a bounded queue.
type pollOutput struct {
	target string
	client mantisv1.ThoraxServiceClient
	logger *slog.Logger
	queue  chan outputBatch
}

func newPollOutput(target string, client mantisv1.ThoraxServiceClient, logger *slog.Logger) *pollOutput {
	return &pollOutput{target: target, client: client, logger: logger, queue: make(chan outputBatch, outputQueue)}
}

// Start does nothing: Thorax hears of a command's output when it has some.
func (o *pollOutput) Start(*mantisv1.Command) {}

// End does nothing: the command's result says it ended.
func (o *pollOutput) End(*mantisv1.Command) {}

// Chunks queues chunks for Thorax, or drops them when the queue is full.
func (o *pollOutput) Chunks(cmd *mantisv1.Command, chunks []*mantisv1.OutputChunk) {
	select {
	case o.queue <- outputBatch{cmd: cmd, chunks: chunks}:
	default:
		o.logger.Debug("live output queue full: dropped chunks", "command_id", cmd.GetId(), "chunks", len(chunks))
	}
}

// run reports queued output until ctx ends.
func (o *pollOutput) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-o.queue:
			o.report(ctx, b)
		}
	}
}

// report sends one batch, retrying once what is worth it; what still fails is dropped.
func (o *pollOutput) report(ctx context.Context, b outputBatch) {
	req := &mantisv1.ReportOutputRequest{Target: o.target, CommandId: b.cmd.GetId(), LeaseEpoch: b.cmd.GetLeaseEpoch(), Chunks: b.chunks}
	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, outputReportTimeout)
		_, err := o.client.ReportOutput(callCtx, req)
		cancel()
		if err == nil {
			return
		}
		if attempt > 1 || !rpc.Retryable(err) || ctx.Err() != nil {
			o.logger.DebugContext(ctx, "reporting live output failed: dropped", "command_id", b.cmd.GetId(), "chunks", len(b.chunks), "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(outputRetryDelay):
		}
	}
}
