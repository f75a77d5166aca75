package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
)

func eventOf(t *testing.T, typ events.Type, data any) apiclient.Event {
	t.Helper()
	b, err := json.Marshal(data)
	require.NoError(t, err)
	return apiclient.Event{Type: typ, Data: b}
}

// A watch counts the typed events of the log into its step lines and stops at the
// deployment's end.
func TestWatchCountsTypedEvents(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := newWatch(&out, api.Deployment{}, outputText)
	pos := 0
	for _, ev := range []apiclient.Event{
		eventOf(t, events.StepStarted, events.StepStartedData{Step: "install", StepPosition: 0, Targets: 2}),
		eventOf(t, events.TargetQueued, events.TargetQueuedData{StepPosition: 0, Target: "a"}),
		eventOf(t, events.TargetQueued, events.TargetQueuedData{StepPosition: 0, Target: "b"}),
		eventOf(t, events.TargetRunning, events.TargetRunningData{StepPosition: &pos, Target: "a"}),
		eventOf(t, events.TargetRunning, events.TargetRunningData{StepPosition: &pos, Target: "b"}),
		eventOf(t, events.TargetSucceeded, events.TargetEndedData{StepPosition: &pos, Target: "a"}),
		eventOf(t, events.TargetFailed, events.TargetEndedData{StepPosition: &pos, Target: "b"}),
		eventOf(t, events.StepFailed, events.StepEndedData{Step: "install", StepPosition: 0, Succeeded: 1, Failed: 1}),
	} {
		_, ended := w.apply(ev)
		require.False(t, ended, ev.Type)
	}
	require.Len(t, w.steps, 1)
	require.Equal(t, stepProgress{name: "install", status: "failed", total: 2, succeeded: 1, failed: 1}, *w.steps[0])
	w.render()
	require.Contains(t, out.String(), "install")
	require.Contains(t, out.String(), "2/2 done  1 failed  0 running  failed")

	final, ended := w.apply(eventOf(t, events.DeploymentFailed, events.DeploymentEndedData{Status: "failed"}))
	require.True(t, ended)
	require.Equal(t, "failed", final)
	_, ended = w.apply(eventOf(t, events.DeploymentCancelRequested, events.CancelRequestedData{Actor: "ci"}))
	require.False(t, ended, "a cancel request does not end the deployment")
}
