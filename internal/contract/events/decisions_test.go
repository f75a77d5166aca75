package events

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDecisionPayloadKeys pins the keys of the decision events' data, which SSE
// clients and the console read.
func TestDecisionPayloadKeys(t *testing.T) {
	t.Parallel()
	step, now := 2, time.Now()
	require.Equal(t, []string{"approvers", "deadline", "kind", "since", "step", "step_name"},
		keys(t, WaitingData{Kind: WaitApproval, Step: "go", Approvers: []string{"a"}, Deadline: &now}))
	require.Equal(t, []string{"kind", "since", "step"}, keys(t, WaitingData{Kind: WaitPaused}))
	require.Equal(t, []string{"at", "by", "comment", "decision", "step"},
		keys(t, DecisionData{Decision: "approve", By: "alice", StepPosition: &step, Comment: "ok"}))
	for _, typ := range DecisionTypes {
		require.True(t, len(typ) > len(DeploymentPrefix) && string(typ[:len(DeploymentPrefix)]) == DeploymentPrefix, typ)
	}
}
