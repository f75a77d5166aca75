package events

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// keys returns the JSON object keys v encodes to, sorted.
func keys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m))
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestPayloadKeys pins each payload's keys to those stored events have: a renamed tag
// would break stored events and SSE clients.
func TestPayloadKeys(t *testing.T) {
	t.Parallel()
	pos, code, id := 1, 2, uuid.New()
	cases := []struct {
		name string
		data any
		want []string
	}{
		{"deployment started", DeploymentStartedData{Targets: []string{"a"}, Steps: 1, Actor: "ci"}, []string{"actor", "steps", "targets"}},
		{"deployment started without actor", DeploymentStartedData{}, []string{"steps", "targets"}},
		{"deployment ended", DeploymentEndedData{Status: "failed", Reason: "x"}, []string{"reason", "status"}},
		{"deployment ended by dead instance", DeploymentEndedData{DeploymentID: id, Reason: "x", InstanceID: id}, []string{"deployment_id", "instance_id", "reason"}},
		{"cancel requested", CancelRequestedData{}, []string{"actor"}},
		{"step started", StepStartedData{}, []string{"step", "step_position", "targets"}},
		{"step ended", StepEndedData{}, []string{"failed", "skipped", "step", "step_position", "succeeded"}},
		{"target queued", TargetQueuedData{}, []string{"request_id", "step_position", "target"}},
		{"target running", TargetRunningData{StepPosition: &pos}, []string{"command_id", "instance_id", "step_position", "target"}},
		{"target ended", TargetEndedData{ExitCode: &code, Error: "e"}, []string{"command_id", "error", "exit_code", "output_tail", "output_truncated", "step_position", "target"}},
		{"target reassigned", TargetReassignedData{}, []string{"from_instance_id", "reason", "target", "to_instance_id"}},
		{"target analysis", TargetAnalysisData{}, []string{"category", "command_id", "deployment_id", "refined_by", "step_position", "suggestion", "summary", "target"}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, keys(t, c.data), c.name)
	}
}

// TestTargetEndedDecodesStoredEvent reads the data a result's SQL writes.
func TestTargetEndedDecodesStoredEvent(t *testing.T) {
	t.Parallel()
	stored := `{"step_position": 0, "target": "web-1", "command_id": "6f1c1a8e-8d1e-4a5e-9a57-2f0b8e7a4c11",
		"exit_code": 3, "output_tail": "boom", "output_truncated": true, "error": "exit 3"}`
	var d TargetEndedData
	require.NoError(t, json.Unmarshal([]byte(stored), &d))
	require.Equal(t, 0, *d.StepPosition)
	require.Equal(t, "web-1", d.Target)
	require.Equal(t, 3, *d.ExitCode)
	require.Equal(t, "boom", d.OutputTail)
	require.True(t, d.OutputTruncated)
	require.Equal(t, "exit 3", d.Error)
}

func TestTypeNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, DeploymentFailed, DeploymentEnded("failed"))
	require.Equal(t, StepSkipped, StepEnded("skipped"))
	require.Equal(t, TargetSucceeded, TargetEnded("succeeded"))
	require.Equal(t, Type("step.started"), StepStarted)
	require.Equal(t, Type("deployment.cancel_requested"), DeploymentCancelRequested)
	require.Equal(t, Type("target.reassigned"), TargetReassigned)
	require.True(t, StepCancelled.IsStep())
	require.False(t, TargetFailed.IsStep())
	require.True(t, DeploymentStarted.IsDeployment())
	require.Equal(t, "cancel_requested", DeploymentCancelRequested.What())
	seen := map[Type]bool{}
	for _, typ := range All {
		require.False(t, seen[typ], "duplicate %s", typ)
		seen[typ] = true
	}
	require.Len(t, All, 17)
}
