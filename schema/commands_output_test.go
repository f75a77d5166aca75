package schema_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema"
)

// hostileOutput is what `printf 'a\000b'; head -c 100 /dev/urandom` may print: NUL,
// bytes that are no UTF-8, a cut sequence, escapes and a carriage return.
var hostileOutput = "a\x00b" + "\xff\xfe\xc3\x28\x80\xed\xa0\x80" + "\x1b[31mred\x1b[0m\r\n" + strings.Repeat("\x00\xf0", 40) + "\xe2\x82"

// runningDeploymentCommand records a one-step deployment on target web-1 and returns it
// with its command, claimed by the bundle's instance.
func runningDeploymentCommand(t *testing.T, b dispatchBundle) (uuid.UUID, schema.Command) {
	t.Helper()
	id, _, err := schema.CreateDeployment(b.ctx, b.pool, schema.NewDeployment{ID: uuid.New(), Name: "bytes", Priority: "normal", Spec: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, schema.StartDeployment(b.ctx, b.pool, id, []schema.StepRecord{{Name: "print", Command: "printf", Timeout: time.Minute}}, []string{"web-1"}))
	require.NoError(t, schema.EnqueueStepTargets(b.ctx, b.pool, id, 0, "normal", schema.NewStepCommand{Command: "printf", Timeout: time.Minute}, []string{"web-1"}))
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	_, err = schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	cmds, err := schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: []string{"web-1"}, Max: 10})
	require.NoError(t, err)
	require.Len(t, cmds, 1)
	return id, cmds[0]
}

// A result whose output and error hold NUL and invalid UTF-8 is stored: the raw bytes
// exactly, the event with a display tail, an analysis, and a view of valid text.
func TestResultWithNULAndInvalidUTF8IsStoredAndShown(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	deployment, cmd := runningDeploymentCommand(t, b)
	now := time.Now()
	stored, err := schema.StoreCommandResult(b.ctx, b.pool, schema.ResultToStore{Instance: b.instance, Command: cmd.ID, Epoch: cmd.LeaseEpoch, Result: schema.CommandResult{
		ExitCode: 3, Output: hostileOutput, Error: "exit\x00ed \xff badly", StartedAt: now, FinishedAt: now,
	}})
	require.NoError(t, err)
	require.Equal(t, "failed", stored.Status)

	var (
		raw     []byte
		display string
		errText string
		status  string
	)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT output_raw, output, error, status FROM command_queue WHERE id = $1`, cmd.ID).
		Scan(&raw, &display, &errText, &status))
	require.Equal(t, "failed", status)
	require.Equal(t, []byte(hostileOutput), raw, "the raw bytes are kept exactly")
	requireDisplayText(t, display)
	require.True(t, strings.HasPrefix(display, "a\u2400b\uFFFD"), display)
	require.Equal(t, "exit\u2400ed \uFFFD badly", errText)

	var data map[string]any
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT data FROM deployment_events WHERE deployment_id = $1 AND type = 'target.failed'`, deployment).Scan(&data))
	tail, _ := data["output_tail"].(string)
	requireDisplayText(t, tail)
	require.Equal(t, safetext.Display([]byte(hostileOutput)), tail)
	require.Equal(t, errText, data["error"])

	a, err := schema.AnalysisByCommandID(b.ctx, b.pool, cmd.ID)
	require.NoError(t, err)
	require.Equal(t, domain.AnalysisQueued, a.Status)
	var input string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT input FROM analyses WHERE command_id = $1`, cmd.ID).Scan(&input))
	requireDisplayText(t, input)

	view, err := schema.GetDeployment(b.ctx, b.pool, deployment)
	require.NoError(t, err)
	tv := view.Steps[0].Targets[0]
	require.Equal(t, "failed", tv.Status)
	require.Equal(t, tail, tv.OutputTail)
	require.Equal(t, errText, tv.Error)
}

// Output beyond MaxRawOutputBytes keeps its end, marked truncated; an error beyond
// safetext.MaxErrorBytes is cut with a marker. Neither is refused.
func TestOversizedOutputAndErrorAreBoundedNotRefused(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	deployment, cmd := runningDeploymentCommand(t, b)
	output := strings.Repeat("\x00", schema.MaxRawOutputBytes) + "THE END"
	now := time.Now()
	_, err := schema.StoreCommandResult(b.ctx, b.pool, schema.ResultToStore{Instance: b.instance, Command: cmd.ID, Epoch: cmd.LeaseEpoch, Result: schema.CommandResult{
		ExitCode: 0, Output: output, Error: strings.Repeat("é", safetext.MaxErrorBytes), StartedAt: now, FinishedAt: now,
	}})
	require.NoError(t, err)

	var (
		raw       []byte
		truncated bool
		errText   string
	)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT output_raw, output_truncated, error FROM command_queue WHERE id = $1`, cmd.ID).
		Scan(&raw, &truncated, &errText))
	require.Len(t, raw, schema.MaxRawOutputBytes)
	require.True(t, strings.HasSuffix(string(raw), "THE END"))
	require.True(t, truncated)
	require.LessOrEqual(t, len(errText), safetext.MaxErrorBytes)
	require.Contains(t, errText, safetext.TruncatedMarker)
	requireDisplayText(t, errText)

	view, err := schema.GetDeployment(b.ctx, b.pool, deployment)
	require.NoError(t, err)
	tv := view.Steps[0].Targets[0]
	require.True(t, tv.Truncated)
	require.Len(t, tv.OutputTail, (schema.OutputTailBytes-len("THE END"))*len("\u2400")+len("THE END"))
	require.True(t, strings.HasSuffix(tv.OutputTail, "\u2400THE END"))
}

func requireDisplayText(t *testing.T, s string) {
	t.Helper()
	require.True(t, utf8.ValidString(s), "not valid UTF-8: %q", s)
	require.NotContains(t, s, "\x00")
}
