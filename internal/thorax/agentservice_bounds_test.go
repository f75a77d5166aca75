package thorax

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/safetext"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// A poll agent's result whose error is long and holds NUL, and whose output is past
// Mandible's limit, reaches Mandible bounded: the error cut with a marker and without
// NUL, the output's tail kept unaltered and marked truncated. (Protobuf refuses invalid
// UTF-8 in a string field on both ends, so the agent makes its error valid text.)
func TestReportedResultFreeTextIsBoundedNotRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	client := f.pollClient(t, th)
	f.mandible.queue(pollCommand("cmd-wordy", "web-poll", 1))
	var cmds []*mantisv1.Command
	require.Eventually(t, func() bool {
		resp, err := client.PollCommands(t.Context(), poll("web-poll", 1, time.Second))
		require.NoError(t, err)
		cmds = resp.GetCommands()
		return len(cmds) == 1
	}, waitFor, 10*time.Millisecond)

	output := append(bytes.Repeat([]byte{0}, maxResultOutput), []byte("\xffthe end")...)
	_, err := client.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-poll", CommandId: cmds[0].GetId(), LeaseEpoch: cmds[0].GetLeaseEpoch(),
		Result: &mantisv1.CommandResult{ExitCode: -1, Output: output, Error: "failed:\x00 " + strings.Repeat("why ", 50<<10)},
	})
	require.NoError(t, err)

	stored := receive(t, f.mandible.stored).GetResult()
	require.LessOrEqual(t, len(stored.GetError()), safetext.MaxErrorBytes)
	require.True(t, strings.HasPrefix(stored.GetError(), "failed:\u2400 why"), stored.GetError()[:40])
	require.Contains(t, stored.GetError(), safetext.TruncatedMarker)
	require.NotContains(t, stored.GetError(), "\x00")
	require.Len(t, stored.GetOutput(), maxResultOutput)
	require.True(t, bytes.HasSuffix(stored.GetOutput(), []byte("\x00\xffthe end")), "the raw tail is kept unaltered")
	require.True(t, stored.GetOutputTruncated())
}

// A refused value is quoted back bounded, not whole.
func TestRefusedAgentValuesAreQuotedBounded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := f.start(t)
	client := f.pollClient(t, th)
	long := strings.Repeat("\x00x", 20<<10)
	_, err := client.ReportResult(t.Context(), &mantisv1.ReportResultRequest{
		Target: "web-poll", CommandId: long, Result: &mantisv1.CommandResult{},
	})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	msg := status.Convert(err).Message()
	require.Less(t, len(msg), 4*maxEchoBytes, msg)
	require.Contains(t, msg, "command_id")

	_, err = client.PollCommands(t.Context(), poll("bad target "+long, 1, time.Second))
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Less(t, len(status.Convert(err).Message()), 4*maxEchoBytes+200)
}
