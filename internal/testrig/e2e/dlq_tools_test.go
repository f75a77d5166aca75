package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// runDLQCLI runs the mantisctl binary against the replica's API with stdin,
// and returns its combined output and exit code.
func runDLQCLI(t *testing.T, r *replica, stdin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t, "mantisctl"),
		append(args, "--server", "http://"+r.HTTPAddr, "--client-config", "")...)
	cmd.Env = append(os.Environ(), "MANTIS_API_URL=", "MANTIS_API_TOKEN=test-token-0123456789abcdef")
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running mantisctl: %v", err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// mantisctl dlq list, requeue and purge go through Mandible's API to the
// broker Mandible is configured with: the operator needs no broker access.
func TestDLQToolsThroughMandible(t *testing.T) {
	r := setupBrokerRig(t, true)
	// Two messages dead-lettered the way Thorax dead-letters them: NACKed
	// without requeue on the normal queue.
	r.publish(t, "normal", nil, []byte(`{"command_id":"0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8e","target":"listen-1","mode":"listen","priority":"normal","max_retries":3}`))
	r.publish(t, "normal", nil, []byte("not a nudge"))
	for range 2 {
		var msg amqp.Delivery
		require.Eventually(t, func() bool {
			m, ok, err := r.admin.Get(broker.NormalQueue, false)
			require.NoError(t, err)
			msg = m
			return ok
		}, brokerWait, 10*time.Millisecond)
		require.NoError(t, msg.Nack(false, false))
	}
	require.Eventually(t, func() bool { return r.depth(t, broker.DeadLetterQ) == 2 }, brokerWait, 20*time.Millisecond)

	out, code := runDLQCLI(t, r.mandible, "", "dlq", "list")
	require.Zero(t, code, out)
	require.Contains(t, out, "mantis.dlq holds 2 message(s); showing 2.")
	require.Contains(t, out, "0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8e")
	require.Contains(t, out, "rejected from mantis.commands.priority.normal x1")
	require.Contains(t, out, "#2 is not a nudge")

	out, code = runDLQCLI(t, r.mandible, "", "dlq", "list", "-o", "json")
	require.Zero(t, code, out)
	var listing broker.DLQListing
	require.NoError(t, json.Unmarshal([]byte(out), &listing))
	require.Equal(t, 2, listing.Depth)
	require.Equal(t, "rejected", listing.Messages[0].Deaths[0].Reason)
	require.Equal(t, 2, r.depth(t, broker.DeadLetterQ), "listing leaves the messages in place")

	out, code = runDLQCLI(t, r.mandible, "", "dlq", "requeue", "--to", "high", "--limit", "1")
	require.Zero(t, code, out)
	require.Contains(t, out, "requeued 1 message(s) from mantis.dlq to mantis.commands.priority.high")
	msg, ok, err := r.admin.Get(broker.HighQueue, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "command.listen.high", msg.RoutingKey)
	require.EqualValues(t, 1, broker.DeathCount(msg.Headers), "the message keeps its x-death")

	out, code = runDLQCLI(t, r.mandible, "no\n", "dlq", "purge")
	require.NotZero(t, code, out)
	require.Contains(t, out, "Drop all 1 message(s) in mantis.dlq for good?")
	require.Equal(t, 1, r.depth(t, broker.DeadLetterQ), "an unconfirmed purge drops nothing")

	out, code = runDLQCLI(t, r.mandible, "yes\n", "dlq", "purge")
	require.Zero(t, code, out)
	require.Contains(t, out, "purged 1 message(s) from mantis.dlq")
	require.Zero(t, r.depth(t, broker.DeadLetterQ))
}
