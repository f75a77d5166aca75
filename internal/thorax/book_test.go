package thorax

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

func TestPollQueueHandsOutHighBeforeNormalBeforeLow(t *testing.T) {
	t.Parallel()
	b := newBook(10)
	n := b.reserve(10)
	require.Equal(t, 10, n)
	var cmds []*mantisv1.Command
	for _, c := range []struct{ name, priority string }{
		{"low-1", "low"}, {"normal-1", "normal"}, {"high-1", "high"}, {"low-2", "low"}, {"high-2", "high"},
	} {
		cmd := pollCommand(c.name, "web-poll", 1)
		cmd.Priority = c.priority
		cmds = append(cmds, cmd)
	}
	require.Empty(t, b.admit(n, instanceID(1), cmds))

	never := func(*mantisv1.Command) time.Time { return time.Now().Add(time.Hour) }
	var order []string
	for {
		taken, _, _, _ := b.takePoll("web-poll", "", 2, never)
		if len(taken) == 0 {
			break
		}
		for _, h := range taken {
			order = append(order, h.cmd.GetCommand())
		}
	}
	require.Equal(t, []string{"echo high-1", "echo high-2", "echo normal-1", "echo low-1", "echo low-2"}, order)
}

func TestCapacityCountsHeldAndReservedCommands(t *testing.T) {
	t.Parallel()
	b := newBook(3)
	require.Equal(t, 2, b.reserve(2))
	require.Equal(t, 1, b.reserve(5), "only the room not promised to another fetch")
	require.Zero(t, b.reserve(1))
	b.admit(1, instanceID(1), nil) // that fetch claimed nothing
	b.admit(2, instanceID(1), []*mantisv1.Command{pollCommand("a", "web-poll", 1)})
	require.Equal(t, 2, b.reserve(5), "one held command leaves room for two")

	b.startDrain()
	require.Zero(t, b.reserve(1), "a draining instance claims nothing")
}
