package schema_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema"
)

// outputEvents reads the target.output events of deployment, in log order.
func outputEvents(t *testing.T, b dispatchBundle, deployment uuid.UUID) []events.TargetOutputData {
	t.Helper()
	evs, err := schema.ReadEvents(b.ctx, b.pool, 0, 1<<62, schema.EventFilter{DeploymentID: &deployment, Types: []string{string(events.TargetOutput)}}, 1000)
	require.NoError(t, err)
	out := make([]events.TargetOutputData, len(evs))
	for i, e := range evs {
		require.NoError(t, json.Unmarshal(e.Data, &out[i]))
	}
	return out
}

// Chunks holding NUL and invalid UTF-8 are stored and evented byte for byte, and a
// chunk sent again (a retried call) is stored once and evented once.
func TestOutputChunksAreStoredOnceByteExact(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	deployment, cmd := runningDeploymentCommand(t, b)
	req := schema.StoreOutputRequest{InstanceID: b.instance, CommandID: cmd.ID, LeaseEpoch: cmd.LeaseEpoch,
		Chunks: []schema.OutputChunk{{Seq: 1, Data: []byte("second\n")}, {Seq: 0, Data: []byte(hostileOutput)}}}
	got, err := schema.StoreCommandOutput(b.ctx, b.pool, req)
	require.NoError(t, err)
	require.Equal(t, schema.StoredOutput{Stored: 2}, got)

	again, err := schema.StoreCommandOutput(b.ctx, b.pool, req)
	require.NoError(t, err)
	require.Equal(t, 0, again.Stored, "a retried chunk is stored once")

	chunks, err := schema.ReadDeploymentOutput(b.ctx, b.pool, deployment, schema.OutputFilter{Target: "web-1"}, 100)
	require.NoError(t, err)
	require.Len(t, chunks, 2)
	require.Equal(t, int64(0), chunks[0].Seq, "stored in seq order whatever the batch's order")
	require.Equal(t, []byte(hostileOutput), chunks[0].Data)
	require.Equal(t, cmd.DispatchRequestID, chunks[0].RequestID)
	require.Equal(t, 0, *chunks[0].Step)

	evs := outputEvents(t, b, deployment)
	require.Len(t, evs, 2, "one event per stored chunk, none for the retry")
	require.Equal(t, []byte(hostileOutput), evs[0].Data)
	require.Equal(t, "web-1", evs[0].Target)
	require.Equal(t, cmd.DispatchRequestID, evs[0].RequestID)
	require.Equal(t, deployment, *evs[0].DeploymentID)

	other := 1
	none, err := schema.ReadDeploymentOutput(b.ctx, b.pool, deployment, schema.OutputFilter{Step: &other}, 100)
	require.NoError(t, err)
	require.Empty(t, none)
}

// Past the per-command bound, one truncation marker is stored and nothing more.
func TestOutputPastTheBoundIsTruncatedWithOneMarker(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	deployment, cmd := runningDeploymentCommand(t, b)
	chunk := bytes.Repeat([]byte("x"), 400)
	var chunks []schema.OutputChunk
	for seq := range int64(5) {
		chunks = append(chunks, schema.OutputChunk{Seq: seq, Data: chunk})
	}
	got, err := schema.StoreCommandOutput(b.ctx, b.pool, schema.StoreOutputRequest{InstanceID: b.instance, CommandID: cmd.ID,
		LeaseEpoch: cmd.LeaseEpoch, Chunks: chunks, MaxBytes: 1000})
	require.NoError(t, err)
	require.Equal(t, schema.StoredOutput{Stored: 3, Truncated: true}, got)

	later, err := schema.StoreCommandOutput(b.ctx, b.pool, schema.StoreOutputRequest{InstanceID: b.instance, CommandID: cmd.ID,
		LeaseEpoch: cmd.LeaseEpoch, Chunks: []schema.OutputChunk{{Seq: 9, Data: []byte("late")}}, MaxBytes: 1000})
	require.NoError(t, err)
	require.Equal(t, schema.StoredOutput{Stored: 0, Truncated: true}, later)

	stored, err := schema.ReadDeploymentOutput(b.ctx, b.pool, deployment, schema.OutputFilter{}, 100)
	require.NoError(t, err)
	require.Len(t, stored, 3)
	require.Equal(t, chunk, stored[1].Data)
	require.True(t, stored[2].Truncated)
	require.Equal(t, schema.OutputTruncatedMarker, string(stored[2].Data))
	evs := outputEvents(t, b, deployment)
	require.Len(t, evs, 3)
	require.True(t, evs[2].Truncated)
}

// Output from an instance that does not hold the command, or at another epoch, is
// refused with ErrNotHeld; an unknown command is ErrNotFound.
func TestOutputFromAnInstanceNotHoldingTheCommandIsRefused(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	deployment, cmd := runningDeploymentCommand(t, b)
	other := uuid.New()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO thorax_instances (id, name) VALUES ($1, 'thorax-2')`, other)
	require.NoError(t, err)
	chunks := []schema.OutputChunk{{Seq: 0, Data: []byte("hello")}}

	_, err = schema.StoreCommandOutput(b.ctx, b.pool, schema.StoreOutputRequest{InstanceID: other, CommandID: cmd.ID, LeaseEpoch: cmd.LeaseEpoch, Chunks: chunks})
	require.ErrorIs(t, err, schema.ErrNotHeld)
	_, err = schema.StoreCommandOutput(b.ctx, b.pool, schema.StoreOutputRequest{InstanceID: b.instance, CommandID: cmd.ID, LeaseEpoch: cmd.LeaseEpoch + 1, Chunks: chunks})
	require.ErrorIs(t, err, schema.ErrNotHeld)
	_, err = schema.StoreCommandOutput(b.ctx, b.pool, schema.StoreOutputRequest{InstanceID: b.instance, CommandID: uuid.New(), LeaseEpoch: 1, Chunks: chunks})
	require.ErrorIs(t, err, schema.ErrNotFound)
	require.Empty(t, outputEvents(t, b, deployment))
}

// Retention deletes output and events written before the cutoff and moves the
// watermark to the last event deleted; what is newer stays.
func TestPruneRetentionDeletesOldOutputAndEventsAndMovesTheWatermark(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	deployment, cmd := runningDeploymentCommand(t, b)
	_, err := schema.StoreCommandOutput(b.ctx, b.pool, schema.StoreOutputRequest{InstanceID: b.instance, CommandID: cmd.ID,
		LeaseEpoch: cmd.LeaseEpoch, Chunks: []schema.OutputChunk{{Seq: 0, Data: []byte("old")}}})
	require.NoError(t, err)
	// Everything so far is 40 days old.
	_, err = b.pool.Exec(b.ctx, `UPDATE deployment_events SET created_at = now() - interval '40 days'`)
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `UPDATE command_output SET created_at = now() - interval '40 days'`)
	require.NoError(t, err)
	var lastOld int64
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT max(id) FROM deployment_events`).Scan(&lastOld))
	_, err = schema.StoreCommandOutput(b.ctx, b.pool, schema.StoreOutputRequest{InstanceID: b.instance, CommandID: cmd.ID,
		LeaseEpoch: cmd.LeaseEpoch, Chunks: []schema.OutputChunk{{Seq: 1, Data: []byte("new")}}})
	require.NoError(t, err)

	before, err := schema.EventsPrunedThrough(b.ctx, b.pool)
	require.NoError(t, err)
	require.Zero(t, before)
	pruned, err := schema.PruneRetention(b.ctx, b.pool, time.Now().Add(-schema.DefaultEventRetention))
	require.NoError(t, err)
	require.Equal(t, int64(1), pruned.Output)
	require.Positive(t, pruned.Events)
	require.Equal(t, lastOld, pruned.Through)

	chunks, err := schema.ReadDeploymentOutput(b.ctx, b.pool, deployment, schema.OutputFilter{}, 100)
	require.NoError(t, err)
	require.Len(t, chunks, 1)
	require.Equal(t, "new", string(chunks[0].Data))
	evs, err := schema.ReadEvents(b.ctx, b.pool, 0, 1<<62, schema.EventFilter{DeploymentID: &deployment}, 1000)
	require.NoError(t, err)
	require.Len(t, evs, 1, "only the new chunk's event is kept")
	require.Greater(t, evs[0].ID, lastOld)
	require.True(t, strings.Contains(string(evs[0].Data), `"seq": 1`) || strings.Contains(string(evs[0].Data), `"seq":1`))

	again, err := schema.PruneRetention(b.ctx, b.pool, time.Now().Add(-schema.DefaultEventRetention))
	require.NoError(t, err)
	require.Equal(t, schema.Pruned{Through: lastOld}, again, "a second pass finds nothing and keeps the watermark")
}
