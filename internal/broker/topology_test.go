package broker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
)

func TestTopologyHasTheSeedCounts(t *testing.T) {
	t.Parallel()
	top := broker.MantisTopology()
	require.Len(t, top.Exchanges, 3)
	require.Len(t, top.Queues, 5)
	require.Len(t, top.Bindings, 8)
	for _, q := range top.Queues {
		if q.Name == broker.DeadLetterQ {
			require.NotContains(t, q.Args, "x-dead-letter-exchange", "the DLQ has no DLX of its own")
		} else {
			require.Equal(t, broker.DeadLetterExch, q.Args["x-dead-letter-exchange"], q.Name)
		}
	}
}

func TestDecodeNudgeNamesTheBadField(t *testing.T) {
	t.Parallel()
	good := `{"command_id":"c","target":"web-1","mode":"poll","priority":"high","max_retries":3}`
	n, err := broker.DecodeNudge([]byte(good))
	require.NoError(t, err)
	require.Equal(t, "web-1", n.Target)
	for body, want := range map[string]string{
		`not json`: "decoding nudge",
		`{"target":"t","mode":"poll","priority":"high"}`:                       "command_id is required",
		`{"command_id":"c","target":"t","mode":"push","priority":"high"}`:      "mode must be poll or listen",
		`{"command_id":"c","target":"t","mode":"poll","priority":"urgent"}`:    "priority must be high, normal or low",
		`{"command_id":"c","target":"t","mode":"poll","priority":"low","x":1}`: "unknown field",
	} {
		_, err := broker.DecodeNudge([]byte(body))
		require.ErrorContains(t, err, want, body)
	}
}
