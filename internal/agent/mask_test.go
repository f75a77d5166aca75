package agent_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// liveOutput collects what a WatchOutput stream sends.
type liveOutput struct {
	mu   sync.Mutex
	data bytes.Buffer
	done chan error
}

func (l *liveOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.data.String()
}

// watchOutput watches the live output of command id on a listen agent.
func watchOutput(t *testing.T, client mantisv1.AgentServiceClient, id string) *liveOutput {
	t.Helper()
	stream, err := client.WatchOutput(callCtx(t), &mantisv1.WatchOutputRequest{CommandId: id})
	require.NoError(t, err)
	l := &liveOutput{done: make(chan error, 1)}
	go func() {
		for {
			c, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				l.done <- err
				return
			}
			l.mu.Lock()
			l.data.Write(c.GetData())
			l.mu.Unlock()
		}
	}()
	return l
}

// A listen agent masks a secret env value, and its base64, in the result's output
// and in every live chunk, even a value printed in two halves with a flush of the
// live output between them; the result and the live output agree.
func TestListenAgentMasksSecretsInResultAndLiveOutput(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-t0ken-42!" // 16 bytes: two halves of 8
	s := setupListen(t, nil)
	client, _ := s.thorax(t)
	gate := fifo(t)

	cmd := command(`echo token=$API_TOKEN; echo $(printf %s "$API_TOKEN" | base64)
echo before; printf %s "${API_TOKEN%????????}"; cat ` + gate + ` >/dev/null
printf '%s\n' "${API_TOKEN#????????}"; echo after`)
	cmd.Timeout = durationpb.New(15 * time.Second)
	cmd.Env = map[string]string{"API_TOKEN": secret, "PLAIN": "shown"}
	cmd.SecretEnv = []string{"API_TOKEN"}
	live := watchOutput(t, client, cmd.GetId())
	result := make(chan outcome, 1)
	go func() {
		resp, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: cmd})
		result <- outcome{resp.GetResult(), err}
	}()

	// The first half is printed and the command waits: the live output has been
	// flushed up to it, and not a byte of it has gone out.
	require.Eventually(t, func() bool { return bytes.Contains([]byte(live.String()), []byte("before\n")) },
		10*time.Second, 10*time.Millisecond)
	require.Equal(t, "token=***\n***\nbefore\n", live.String())
	require.NoError(t, openFIFO(t, gate).Close())

	res := recv(t, result).result(t)
	require.NoError(t, recv(t, live.done))
	want := "token=***\n***\nbefore\n***\nafter\n"
	require.Equal(t, want, string(res.GetOutput()))
	require.Equal(t, want, live.String(), "the live output agrees with the result")
	encoded := base64.StdEncoding.EncodeToString([]byte(secret))
	for _, out := range []string{string(res.GetOutput()), live.String()} {
		require.NotContains(t, out, secret)
		require.NotContains(t, out, encoded)
		require.NotContains(t, out, secret[:8])
	}
}
