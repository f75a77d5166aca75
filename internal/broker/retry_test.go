package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
)

// fakeProcessor answers every nudge with err and records what it was asked.
type fakeProcessor struct {
	err       error
	processed int
	gaveUp    int
}

func (p *fakeProcessor) Process(context.Context, broker.Nudge) error { p.processed++; return p.err }

func (p *fakeProcessor) GiveUp(context.Context, broker.Nudge, error) { p.gaveUp++ }

func nudgeBody(maxRetries int) []byte {
	return fmt.Appendf(nil, `{"command_id":"0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8e","target":"web-1","mode":"poll","priority":"high","max_retries":%d}`, maxRetries)
}

// xDeath is the header the broker writes after count dead-letterings from
// the high queue.
func xDeath(count int64) amqp.Table {
	if count == 0 {
		return nil
	}
	return amqp.Table{"x-death": []any{amqp.Table{
		"count": count, "queue": broker.HighQueue, "reason": "rejected", "exchange": broker.CommandsExchange,
		"routing-keys": []any{"command.poll.high"}, "time": time.Unix(1_800_000_000, 0),
	}}}
}

// The seed's Retry Behaviour, step by step, over x-death count, redelivery
// and max_retries.
func TestRetryRules(t *testing.T) {
	t.Parallel()
	failed := errors.New("mandible unreachable")
	cases := []struct {
		name        string
		deaths      int64
		maxRetries  int
		redelivered bool
		outcome     error
		verdict     broker.Verdict
		processed   bool
		gaveUp      bool
	}{
		{"deaths meet max_retries: DLQ unprocessed", 3, 3, false, nil, broker.DeadLetter, false, false},
		{"deaths over max_retries: DLQ unprocessed", 5, 3, true, nil, broker.DeadLetter, false, false},
		{"deaths below max_retries: processed", 2, 3, false, nil, broker.Ack, true, false},
		{"max_retries 0 ignores deaths: processed", 7, 0, false, nil, broker.Ack, true, false},
		{"success: ack", 0, 3, false, nil, broker.Ack, true, false},
		{"success of a redelivered message: ack", 0, 3, true, nil, broker.Ack, true, false},
		{"first failure: requeued once", 0, 3, false, failed, broker.Requeue, true, false},
		{"failure of a redelivered message: redispatch asked, then DLQ", 0, 3, true, failed, broker.DeadLetter, true, true},
		{"max_retries 0 failure: straight to the DLQ", 0, 0, false, failed, broker.DeadLetter, true, true},
		{"max_retries 0 failure when redelivered: DLQ", 0, 0, true, failed, broker.DeadLetter, true, true},
		{"unprocessable: DLQ without the retry", 0, 3, false, fmt.Errorf("%w: no such command", broker.ErrUnprocessable), broker.DeadLetter, true, false},
		{"busy: ack, no retry spent", 0, 3, false, fmt.Errorf("%w: at capacity", broker.ErrBusy), broker.Ack, true, false},
		{"busy when redelivered: ack, not the DLQ", 0, 3, true, fmt.Errorf("%w: draining", broker.ErrBusy), broker.Ack, true, false},
		{"busy at max_retries 0: ack, not the DLQ", 0, 0, false, fmt.Errorf("%w: at capacity", broker.ErrBusy), broker.Ack, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := &fakeProcessor{err: c.outcome}
			h := broker.NudgeHandler(p, slog.New(slog.DiscardHandler))
			v := h(context.Background(), broker.Delivery{Priority: "high", Delivery: amqp.Delivery{
				Body: nudgeBody(c.maxRetries), Headers: xDeath(c.deaths), Redelivered: c.redelivered,
			}})
			require.Equal(t, c.verdict, v, "verdict %s", v)
			require.Equal(t, c.processed, p.processed == 1, "processed")
			require.Equal(t, c.gaveUp, p.gaveUp == 1, "gave up (asked for another dispatch)")
		})
	}
}

func TestRetryRulesDeadLetterMalformedNudgesUnprocessed(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`not json`, `{"command_id":"c","target":"t","mode":"push","priority":"high"}`, ``} {
		p := &fakeProcessor{}
		v := broker.NudgeHandler(p, slog.New(slog.DiscardHandler))(context.Background(),
			broker.Delivery{Priority: "low", Delivery: amqp.Delivery{Body: []byte(body)}})
		require.Equal(t, broker.DeadLetter, v, body)
		require.Zero(t, p.processed, body)
	}
}

// A failure while the consumer stops leaves the message for the broker to
// requeue instead of spending its retry.
func TestRetryRulesLeaveAFailureWhileStopping(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &fakeProcessor{err: errors.New("draining")}
	v := broker.NudgeHandler(p, slog.New(slog.DiscardHandler))(ctx,
		broker.Delivery{Priority: "normal", Delivery: amqp.Delivery{Body: nudgeBody(3), Redelivered: true}})
	require.Equal(t, broker.Leave, v)
	require.Zero(t, p.gaveUp)
}

func TestRetryRulesReadTheXDeathHeader(t *testing.T) {
	t.Parallel()
	h := xDeath(2)
	h["x-death"] = append(h["x-death"].([]any), amqp.Table{"count": int32(1), "queue": broker.DeadLetterQ, "reason": "expired"}, "junk")
	deaths := broker.Deaths(h)
	require.Len(t, deaths, 2)
	require.Equal(t, broker.Death{Queue: broker.HighQueue, Reason: "rejected", Count: 2, Exchange: broker.CommandsExchange,
		RoutingKeys: []string{"command.poll.high"}, Time: time.Unix(1_800_000_000, 0)}, deaths[0])
	require.EqualValues(t, 3, broker.DeathCount(h))
	require.Zero(t, broker.DeathCount(nil))
}
