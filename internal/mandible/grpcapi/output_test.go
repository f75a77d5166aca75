package grpcapi_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/mantis-deploy/mantis/internal/contract/liveoutput"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// Output chunks are stored only from the instance holding the command, for its
// target, each once; a batch past the bounds is refused naming the field.
func TestStoreCommandOutputIsFencedToTheHolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	holder := b.register(t, "thorax-a")
	other := b.register(t, "thorax-b")
	_, err := b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: holder, PollTargets: []string{"web-1"}})
	require.NoError(t, err)
	cmdID := b.dispatch(t, "k1", "web-1", nil)
	resp, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: holder, PollTargets: []string{"web-1"}, MaxCommands: 1})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)
	epoch := resp.GetCommands()[0].GetLeaseEpoch()
	chunks := []*mantisv1.OutputChunk{{Seq: 0, Data: []byte("a\x00b\xff")}}
	req := func(instance, target string) *mantisv1.StoreCommandOutputRequest {
		return &mantisv1.StoreCommandOutputRequest{InstanceId: instance, CommandId: cmdID.String(), LeaseEpoch: epoch, Target: target, Chunks: chunks}
	}

	_, err = b.client.StoreCommandOutput(b.ctx, req(other, "web-1"))
	require.Equal(t, codes.FailedPrecondition, code(err), "%v", err)
	_, err = b.client.StoreCommandOutput(b.ctx, req(holder, "web-2"))
	require.Equal(t, codes.FailedPrecondition, code(err), "another target's agent: %v", err)

	stored, err := b.client.StoreCommandOutput(b.ctx, req(holder, "web-1"))
	require.NoError(t, err)
	require.EqualValues(t, 1, stored.GetStored())
	again, err := b.client.StoreCommandOutput(b.ctx, req(holder, "web-1"))
	require.NoError(t, err)
	require.EqualValues(t, 0, again.GetStored(), "a retried chunk is stored once")
	var data []byte
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT data FROM command_output WHERE command_id = $1`, cmdID).Scan(&data))
	require.Equal(t, []byte("a\x00b\xff"), data)

	big := &mantisv1.StoreCommandOutputRequest{InstanceId: holder, CommandId: cmdID.String(), LeaseEpoch: epoch,
		Chunks: []*mantisv1.OutputChunk{{Seq: 1, Data: bytes.Repeat([]byte("x"), liveoutput.MaxChunkBytes+1)}}}
	_, err = b.client.StoreCommandOutput(b.ctx, big)
	require.Equal(t, codes.InvalidArgument, code(err))
	require.ErrorContains(t, err, "chunks[0].data")
	many := &mantisv1.StoreCommandOutputRequest{InstanceId: holder, CommandId: cmdID.String(), LeaseEpoch: epoch}
	for i := range liveoutput.MaxChunksPerCall + 1 {
		many.Chunks = append(many.Chunks, &mantisv1.OutputChunk{Seq: int64(i), Data: []byte("x")})
	}
	_, err = b.client.StoreCommandOutput(b.ctx, many)
	require.Equal(t, codes.InvalidArgument, code(err))
	require.ErrorContains(t, err, "chunks")
}
