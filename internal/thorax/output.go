package thorax

import (
	"context"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/contract/liveoutput"
	"github.com/mantis-deploy/mantis/internal/rpc"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// Live output goes from agents to Mandible through a bounded queue of batches: an
// agent's call is answered at once, and what the queue cannot hold is dropped. The
// results' own path never waits for it.
const (
	// outputShards is how many forwarders store output at once; a command's batches
	// all go through one shard, so they reach Mandible in the order they came.
	outputShards = 8
	// outputQueueBatches bounds the batches each shard holds.
	outputQueueBatches = 256
	// outputCallTimeout bounds one StoreCommandOutput call: up to a MiB of chunks and
	// their events in one transaction, on a database busy with a fleet's output.
	outputCallTimeout = 30 * time.Second
	// outputRetryDelay is the wait before the one retry of a batch that failed in a
	// way worth repeating.
	outputRetryDelay = 200 * time.Millisecond
)

// outputBatch is chunks of one command on their way to Mandible.
type outputBatch struct {
	instanceID string
	target     string
	commandID  string
	leaseEpoch int64
	chunks     []*mantisv1.OutputChunk
}

// outputForwarder holds the shards' queues.
type outputForwarder struct {
	shards  [outputShards]chan outputBatch
	dropped atomic.Int64
}

func newOutputForwarder() *outputForwarder {
	f := &outputForwarder{}
	for i := range f.shards {
		f.shards[i] = make(chan outputBatch, outputQueueBatches)
	}
	return f
}

// enqueue queues b on its command's shard, or drops it when the shard is full.
func (f *outputForwarder) enqueue(b outputBatch) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(b.commandID))
	select {
	case f.shards[h.Sum32()%outputShards] <- b:
		return true
	default:
		f.dropped.Add(int64(len(b.chunks)))
		return false
	}
}

// runOutput forwards queued output until work ends.
func (t *Thorax) runOutput(work context.Context) {
	done := make(chan struct{}, outputShards)
	for _, q := range t.output.shards {
		go func() {
			defer func() { done <- struct{}{} }()
			var carry *outputBatch
			for {
				var b outputBatch
				if carry != nil {
					b, carry = *carry, nil
				} else {
					select {
					case <-work.Done():
						return
					case b = <-q:
					}
				}
				b, carry = mergeOutput(b, q)
				t.storeOutput(work, b)
			}
		}()
	}
	for range outputShards {
		<-done
	}
}

// mergeOutput adds to b the batches of the same command queued right behind it, up
// to liveoutput.MaxChunksPerCall chunks, and returns the first batch it took that did
// not fit, to be sent next, so every command's batches keep their order.
func mergeOutput(b outputBatch, q chan outputBatch) (outputBatch, *outputBatch) {
	for len(b.chunks) < liveoutput.MaxChunksPerCall {
		select {
		case next := <-q:
			if next.commandID != b.commandID || next.instanceID != b.instanceID ||
				len(b.chunks)+len(next.chunks) > liveoutput.MaxChunksPerCall {
				return b, &next
			}
			b.chunks = append(b.chunks, next.chunks...)
		default:
			return b, nil
		}
	}
	return b, nil
}

// storeOutput sends b to Mandible, retrying once what is worth it; output that still
// fails is dropped, logged at debug level.
func (t *Thorax) storeOutput(ctx context.Context, b outputBatch) {
	client, _ := t.registration()
	if client == nil {
		return
	}
	req := &mantisv1.StoreCommandOutputRequest{InstanceId: b.instanceID, CommandId: b.commandID,
		LeaseEpoch: b.leaseEpoch, Target: b.target, Chunks: b.chunks}
	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, outputCallTimeout)
		_, err := client.StoreCommandOutput(callCtx, req)
		cancel()
		if err == nil {
			return
		}
		if attempt > 1 || !rpc.Retryable(err) || ctx.Err() != nil {
			t.output.dropped.Add(int64(len(b.chunks)))
			t.logger.DebugContext(ctx, "dropped command output", "command_id", b.commandID,
				"chunks", len(b.chunks), "code", status.Code(err).String(), "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(outputRetryDelay):
		}
	}
}

// outputHolder is the instance id a poll-mode command of target is held under, ""
// when this instance does not hold it (its result may be stored already: its last
// chunks trail it), or errOtherTarget.
func (b *book) outputHolder(target, commandID string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[commandID]
	switch {
	case !ok:
		return "", nil
	case h.cmd.GetTarget() != target:
		return "", errOtherTarget
	}
	return h.instanceID, nil
}

// ReportOutput takes chunks of a running command's output from its poll agent and
// queues them for Mandible; it answers at once. Malformed batches are refused naming
// the field; a command of another target is FAILED_PRECONDITION.
func (s *agentService) ReportOutput(ctx context.Context, req *mantisv1.ReportOutputRequest) (*mantisv1.ReportOutputResponse, error) {
	if err := checkOutputReport(req); err != nil {
		return nil, err
	}
	if err := s.authorizeTarget(ctx, req.GetTarget()); err != nil {
		return nil, err
	}
	t := s.t
	instanceID, err := t.book.outputHolder(req.GetTarget(), req.GetCommandId())
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "command_id: command %s is not a command of target %s", req.GetCommandId(), req.GetTarget())
	}
	if instanceID == "" {
		_, instanceID = t.registration()
	}
	if instanceID == "" {
		return nil, status.Error(codes.Unavailable, "thorax is not registered with mandible")
	}
	if !t.output.enqueue(outputBatch{instanceID: instanceID, target: req.GetTarget(), commandID: req.GetCommandId(),
		leaseEpoch: req.GetLeaseEpoch(), chunks: req.GetChunks()}) {
		t.logger.DebugContext(ctx, "output queue full: dropped chunks", "command_id", req.GetCommandId(), "chunks", len(req.GetChunks()))
	}
	return &mantisv1.ReportOutputResponse{}, nil
}

// checkOutputReport checks the fields and bounds of an output report.
func checkOutputReport(req *mantisv1.ReportOutputRequest) error {
	if err := checkTarget(req.GetTarget()); err != nil {
		return err
	}
	if _, err := uuid.Parse(req.GetCommandId()); err != nil {
		return status.Errorf(codes.InvalidArgument, "command_id: must be a UUID, got %s", echo(req.GetCommandId()))
	}
	if req.GetLeaseEpoch() < 1 {
		return status.Errorf(codes.InvalidArgument, "lease_epoch: must be positive, got %d", req.GetLeaseEpoch())
	}
	return checkOutputChunks(req.GetChunks())
}

// checkOutputChunks checks a batch against liveoutput's bounds.
func checkOutputChunks(chunks []*mantisv1.OutputChunk) error {
	if n := len(chunks); n == 0 || n > liveoutput.MaxChunksPerCall {
		return status.Errorf(codes.InvalidArgument, "chunks: must be 1-%d, got %d", liveoutput.MaxChunksPerCall, n)
	}
	for i, c := range chunks {
		if c.GetSeq() < 0 {
			return status.Errorf(codes.InvalidArgument, "chunks[%d].seq: must not be negative, got %d", i, c.GetSeq())
		}
		if n := len(c.GetData()); n == 0 || n > liveoutput.MaxChunkBytes {
			return status.Errorf(codes.InvalidArgument, "chunks[%d].data: must be 1-%d bytes, got %d", i, liveoutput.MaxChunkBytes, n)
		}
	}
	return nil
}

// watchListenOutput streams the output of a listen-mode command from its agent to
// Mandible until the agent ends the stream or ctx ends. It is best effort: a failure
// is logged at debug level and the command's result does not wait for it.
func (t *Thorax) watchListenOutput(ctx context.Context, client mantisv1.AgentServiceClient, h *holding) {
	stream, err := client.WatchOutput(ctx, &mantisv1.WatchOutputRequest{CommandId: h.cmd.GetId()})
	if err != nil {
		t.logger.DebugContext(ctx, "watching listen agent output failed", "command_id", h.cmd.GetId(), "err", err)
		return
	}
	for {
		c, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.OK && ctx.Err() == nil {
				t.logger.Log(ctx, slog.LevelDebug, "listen agent output stream ended", "command_id", h.cmd.GetId(), "err", err)
			}
			return
		}
		if len(c.GetData()) == 0 || len(c.GetData()) > liveoutput.MaxChunkBytes || c.GetSeq() < 0 {
			continue
		}
		t.output.enqueue(outputBatch{instanceID: h.instanceID, target: h.cmd.GetTarget(), commandID: h.cmd.GetId(),
			leaseEpoch: h.cmd.GetLeaseEpoch(), chunks: []*mantisv1.OutputChunk{c}})
	}
}
