package devstack

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The stack's free ports are distinct and below the ephemeral range, where no
// outgoing connection can take one between its choice and the server's bind; a port
// given is kept.
func TestResolvedPortsAreDistinctAndBelowTheEphemeralRange(t *testing.T) {
	for range 50 {
		p, err := resolvePorts(Ports{Postgres: 5432})
		require.NoError(t, err)
		require.Equal(t, 5432, p.Postgres)
		seen := map[int]bool{}
		for _, port := range []int{p.AMQPS, p.RabbitMQManagement, p.RabbitMQDist, p.EPMD,
			p.Temporal, p.TemporalUI, p.TemporalHTTP, p.TemporalMetrics} {
			require.Less(t, port, 32768)
			require.GreaterOrEqual(t, port, 20000)
			require.False(t, seen[port], "port %d chosen twice", port)
			seen[port] = true
		}
	}
}
