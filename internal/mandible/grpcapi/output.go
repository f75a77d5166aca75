package grpcapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/mantis-deploy/mantis/internal/contract/liveoutput"
	"github.com/mantis-deploy/mantis/internal/safetext"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// StoreCommandOutput stores chunks of a running command's output from the instance
// that holds it. A batch over liveoutput.MaxChunksPerCall chunks, a chunk over
// liveoutput.MaxChunkBytes or a negative seq is INVALID_ARGUMENT naming it; a caller
// that does not hold the command at the epoch is FAILED_PRECONDITION.
func (s *MandibleService) StoreCommandOutput(ctx context.Context, req *mantisv1.StoreCommandOutputRequest) (*mantisv1.StoreCommandOutputResponse, error) {
	id, err := parseID("instance_id", req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if err := s.authorizeInstance(ctx, id); err != nil {
		return nil, err
	}
	cmd, err := parseID("command_id", req.GetCommandId())
	if err != nil {
		return nil, err
	}
	if t := req.GetTarget(); t != "" {
		if err := (schema.NewTarget{Name: t, Mode: schema.ModePoll}).Validate(); err != nil {
			return nil, invalid("target", "%q is not a valid target name", safetext.Bound(t, maxNameLen))
		}
	}
	if req.GetLeaseEpoch() < 1 {
		return nil, invalid("lease_epoch", "must be positive, got %d", req.GetLeaseEpoch())
	}
	chunks, err := checkChunks(req.GetChunks())
	if err != nil {
		return nil, err
	}
	stored, err := schema.StoreCommandOutput(ctx, s.DB, schema.StoreOutputRequest{
		InstanceID: id, CommandID: cmd, LeaseEpoch: req.GetLeaseEpoch(), Target: req.GetTarget(), Chunks: chunks,
		MaxBytes: s.MaxOutputBytesPerCommand,
	})
	if err != nil {
		if errors.Is(err, schema.ErrNotHeld) {
			s.Logger.DebugContext(ctx, "refused command output", "instance_id", id, "command_id", cmd, "lease_epoch", req.GetLeaseEpoch(), "err", err)
		}
		return nil, s.toStatus(ctx, "StoreCommandOutput", err)
	}
	return &mantisv1.StoreCommandOutputResponse{Stored: int32(stored.Stored), Truncated: stored.Truncated}, nil
}

// checkChunks checks a batch's bounds and returns it as the schema takes it.
func checkChunks(in []*mantisv1.OutputChunk) ([]schema.OutputChunk, error) {
	if len(in) == 0 {
		return nil, invalid("chunks", "required")
	}
	if len(in) > liveoutput.MaxChunksPerCall {
		return nil, invalid("chunks", "at most %d per call, got %d", liveoutput.MaxChunksPerCall, len(in))
	}
	out := make([]schema.OutputChunk, len(in))
	for i, c := range in {
		field := fmt.Sprintf("chunks[%d]", i)
		switch {
		case c.GetSeq() < 0:
			return nil, invalid(field+".seq", "must not be negative, got %d", c.GetSeq())
		case len(c.GetData()) == 0:
			return nil, invalid(field+".data", "required")
		case len(c.GetData()) > liveoutput.MaxChunkBytes:
			return nil, invalid(field+".data", "at most %d bytes, got %d", liveoutput.MaxChunkBytes, len(c.GetData()))
		}
		out[i] = schema.OutputChunk{Seq: c.GetSeq(), Data: c.GetData()}
	}
	return out, nil
}
