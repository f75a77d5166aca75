package grpcapi_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/safetext"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// claimOne registers an instance polling web-1 and claims one command for it.
func claimOne(t *testing.T, b bundle, key string) (string, *mantisv1.Command) {
	t.Helper()
	inst := b.register(t, "thorax-"+key)
	_, err := b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"web-1"}})
	require.NoError(t, err)
	b.dispatch(t, key, "web-1", nil)
	resp, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 1})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)
	return inst, resp.GetCommands()[0]
}

// A result whose output is past the limit and not text, and whose error is long and
// holds NUL, is stored, not refused: the output's last bytes unaltered and marked
// truncated, the error cut with a marker and without NUL.
func TestOversizedResultIsStoredBoundedNotRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst, c := claimOne(t, b, "wordy")
	output := append(bytes.Repeat([]byte("\x00\xff"), schema.MaxRawOutputBytes), []byte("\xc3the end")...)
	_, err := b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{
		InstanceId: inst, CommandId: c.GetId(), LeaseEpoch: c.GetLeaseEpoch(), Result: &mantisv1.CommandResult{
			ExitCode: 1, Output: output, Error: "broke\x00 " + strings.Repeat("because ", 10<<10),
			StartedAt: timestamppb.Now(), FinishedAt: timestamppb.Now(),
		},
	})
	require.NoError(t, err)

	var (
		raw       []byte
		display   string
		truncated bool
		errText   string
	)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT output_raw, output, output_truncated, error FROM command_queue WHERE id = $1`, c.GetId()).
		Scan(&raw, &display, &truncated, &errText))
	require.Len(t, raw, schema.MaxRawOutputBytes)
	require.Equal(t, output[len(output)-schema.MaxRawOutputBytes:], raw)
	require.True(t, truncated)
	require.True(t, utf8.ValidString(display))
	require.True(t, strings.HasSuffix(display, "\u2400\uFFFD\uFFFDthe end"), display[len(display)-40:])
	require.LessOrEqual(t, len(errText), safetext.MaxErrorBytes)
	require.True(t, strings.HasPrefix(errText, "broke\u2400 because"))
	require.Contains(t, errText, safetext.TruncatedMarker)
}

// A redispatch reason past the limit is cut with a marker, not refused.
func TestLongRedispatchReasonIsCutNotRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst, c := claimOne(t, b, "reasons")
	resp, err := b.client.ScheduleRedispatch(b.ctx, &mantisv1.ScheduleRedispatchRequest{
		InstanceId: inst, CommandId: c.GetId(), LeaseEpoch: c.GetLeaseEpoch(), Reason: "agent gone\x00 " + strings.Repeat("x", 20<<10),
	})
	require.NoError(t, err)
	require.True(t, resp.GetScheduled())
	var lastError string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT last_error FROM pending_dispatch_requests WHERE id = $1`, c.GetDispatchRequestId()).Scan(&lastError))
	require.LessOrEqual(t, len(lastError), safetext.MaxReasonBytes+len("dispatch failed: "))
	require.Contains(t, lastError, "agent gone\u2400 xxx")
	require.Contains(t, lastError, safetext.TruncatedMarker)
}
