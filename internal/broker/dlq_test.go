package broker_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
)

// deadLetter puts bodies in mantis.dlq the way Thorax does: published to the
// command queue of priority, then NACKed without requeue.
func (bb brokerBundle) deadLetter(t *testing.T, priority string, headers amqp.Table, bodies ...[]byte) {
	t.Helper()
	before := bb.depth(t, broker.DeadLetterQ)
	bb.publish(t, priority, headers, bodies...)
	for range bodies {
		msg, ok, err := bb.ch.Get(broker.CommandQueue(priority), false)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, msg.Nack(false, false))
	}
	require.Eventually(t, func() bool { return bb.depth(t, broker.DeadLetterQ) == before+len(bodies) }, waitFor, 20*time.Millisecond)
}

func TestDLQListShowsMessagesWithTheirDeathsAndLeavesThem(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	bb.deadLetter(t, "high", nil, nudgeBody(3), []byte("not a nudge"), []byte{0xff, 0xfe})
	dlq := broker.NewDLQ(bb.cfg, "dlq test")

	listing, err := dlq.List(context.Background(), 2)
	require.NoError(t, err)
	require.Equal(t, broker.DeadLetterQ, listing.Queue)
	require.Equal(t, 3, listing.Depth)
	require.Len(t, listing.Messages, 2)
	first := listing.Messages[0]
	require.NotNil(t, first.Nudge)
	require.Equal(t, "web-1", first.Nudge.Target)
	require.Equal(t, "command.poll.high", first.RoutingKey)
	require.Len(t, first.Deaths, 1)
	require.Equal(t, broker.Death{Queue: broker.HighQueue, Reason: "rejected", Count: 1, Exchange: broker.CommandsExchange,
		RoutingKeys: []string{"command.poll.high"}, Time: first.Deaths[0].Time}, first.Deaths[0])
	require.Contains(t, first.Headers, "x-death")
	require.Nil(t, listing.Messages[1].Nudge)
	require.Contains(t, listing.Messages[1].Problem, "decoding nudge")

	// Listing left all three in place, in order.
	listing, err = dlq.List(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, listing.Messages, 3)
	require.Equal(t, "utf-8", listing.Messages[1].BodyEncoding)
	require.Equal(t, "not a nudge", listing.Messages[1].Body)
	require.Equal(t, "base64", listing.Messages[2].BodyEncoding)
	require.Equal(t, 3, bb.depth(t, broker.DeadLetterQ))

	listing, err = dlq.List(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 3, listing.Depth)
	require.Empty(t, listing.Messages)
}

// Requeue moves messages to the chosen priority with routing key
// command.<mode>.<to>, keeping x-death, oldest first, up to the limit.
func TestDLQRequeueMovesMessagesKeepingTheirDeaths(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	listen := []byte(`{"command_id":"0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8f","target":"db-1","mode":"listen","priority":"low","max_retries":3}`)
	bb.deadLetter(t, "low", nil, listen, []byte("malformed"), nudgeBody(2))
	dlq := broker.NewDLQ(bb.cfg, "dlq test")

	n, err := dlq.Requeue(context.Background(), "high", 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, 1, bb.depth(t, broker.DeadLetterQ))
	require.Equal(t, 2, bb.depth(t, broker.HighQueue))

	msg, ok, err := bb.ch.Get(broker.HighQueue, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, listen, msg.Body)
	require.Equal(t, "command.listen.high", msg.RoutingKey, "the mode comes from the body")
	require.Equal(t, uint8(amqp.Persistent), msg.DeliveryMode)
	require.EqualValues(t, 1, broker.DeathCount(msg.Headers), "x-death travels with the message")
	msg, ok, err = bb.ch.Get(broker.HighQueue, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "command.poll.high", msg.RoutingKey, "a body without a mode goes as poll")

	// 0 moves what is left.
	n, err = dlq.Requeue(context.Background(), "normal", 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, bb.depth(t, broker.DeadLetterQ))
	require.Equal(t, 1, bb.depth(t, broker.NormalQueue))

	_, err = dlq.Requeue(context.Background(), "urgent", 1)
	require.ErrorContains(t, err, "priority must be high, normal or low")
}

func TestDLQPurgeEmptiesIt(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	bb.deadLetter(t, "normal", nil, nudgeBody(1), nudgeBody(1))
	dlq := broker.NewDLQ(bb.cfg, "dlq test")
	n, err := dlq.Purge(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Zero(t, bb.depth(t, broker.DeadLetterQ))
}

func TestDLQWithoutTopologySaysSo(t *testing.T) {
	t.Parallel()
	bb := setup(t, false)
	_, err := broker.NewDLQ(bb.cfg, "dlq test").List(context.Background(), 1)
	require.ErrorContains(t, err, "mantis.dlq does not exist")
}

// Requeue moves a DLQ larger than one batch, and one whose copies the broker
// cannot route stays on the DLQ.
func TestDLQRequeueInBatchesAndKeepsWhatItCannotRoute(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	bodies := make([][]byte, 250)
	for i := range bodies {
		bodies[i] = nudgeBody(3)
	}
	bb.deadLetter(t, "normal", nil, bodies...)
	dlq := broker.NewDLQ(bb.cfg, "dlq test")
	n, err := dlq.Requeue(context.Background(), "low", 0)
	require.NoError(t, err)
	require.Equal(t, 250, n)
	require.Equal(t, 250, bb.depth(t, broker.LowQueue))
	require.Zero(t, bb.depth(t, broker.DeadLetterQ))

	bb.deadLetter(t, "normal", nil, nudgeBody(3))
	require.NoError(t, bb.ch.QueueUnbind(broker.HighQueue, "command.poll.high", broker.CommandsExchange, nil))
	n, err = dlq.Requeue(context.Background(), "high", 0)
	require.ErrorContains(t, err, "no queue is bound to mantis.commands with command.poll.high")
	require.Zero(t, n)
	require.Eventually(t, func() bool { return bb.depth(t, broker.DeadLetterQ) == 1 }, waitFor, 20*time.Millisecond,
		"the message it could not route is back on the DLQ")
}
