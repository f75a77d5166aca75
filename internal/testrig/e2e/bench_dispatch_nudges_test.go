package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/internal/broker"
)

const (
	// nudgeReplicas is how many Mandible replicas dispatch with nudges on.
	nudgeReplicas = 3
	// nudgeDispatchRounds is how many times each side drains per iteration, in turns,
	// so that drift in the machine's load hits them alike.
	nudgeDispatchRounds = 3
)

// BenchmarkDispatchEndToEndNudges measures dispatch at three Mandible replicas with the
// broker on (`make bench BENCH=DispatchEndToEndNudges`): each delivery writes its
// commands and publishes a nudge for each, persistent, with publisher confirms. In the
// same run it measures the two ceilings the goal is taken from: River with a 1 ms fetch
// cooldown draining as many no-op jobs with as many clients, and bare amqp091-go
// publishing as many nudges with confirms in batches of 100 from as many connections
// to the same broker. Goal: Mandible at least min(0.6 × River, 0.8 × bare confirms).
func BenchmarkDispatchEndToEndNudges(b *testing.B) {
	var mandible, riverFast, bare time.Duration
	for range b.N * nudgeDispatchRounds {
		scenario(b, "dispatch-with-nudges", func(t *testing.T) {
			bb := setupBenchBroker(t)
			conn, ch := bb.dial(t) // one connection for the counts the drain polls
			defer conn.Close()
			mandible += runMandibleDrain(t, nudgeReplicas, &bb.b, func() int { return queuedNudges(t, ch) })
			bare += runBarePublishes(t, bb, nudgeReplicas, e2eRequests)
		})
		scenario(b, "river", func(t *testing.T) { riverFast += runRiverDrain(t, nudgeReplicas, river.FetchCooldownMin) })
	}
	rounds := b.N * nudgeDispatchRounds
	rate := func(d time.Duration) float64 { return float64(e2eRequests*rounds) / d.Seconds() }
	goal := min(0.6*rate(riverFast), 0.8*rate(bare))
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rate(mandible), "mandible-req/s")
	b.ReportMetric(rate(riverFast), "river-jobs/s")
	b.ReportMetric(rate(bare), "bare-confirms/s")
	b.ReportMetric(rate(mandible)/rate(riverFast), "ratio-river")
	b.ReportMetric(rate(mandible)/rate(bare), "ratio-confirms")
	b.ReportMetric(rate(mandible)/goal, "ratio-goal")
	row := func(name string, d time.Duration, goal string) []string {
		return []string{name, strconv.Itoa(e2eRequests), seconds(d / time.Duration(rounds)), fmt.Sprintf("%.0f", rate(d)),
			fmt.Sprintf("%.2f", rate(mandible)/rate(d)), goal}
	}
	logTable(b, [][]string{
		{fmt.Sprintf("dispatch, %d processes, nudges on", nudgeReplicas), "drained", "seconds", "per second", "Mandible/this", "goal"},
		row("Mandible (enqueue -> command_queue and every nudge queued)", mandible, fmt.Sprintf(">= %.0f/s", goal)),
		row("River, FetchCooldown 1ms (InsertMany -> completed)", riverFast, ">= 0.60 (or the next)"),
		row("bare amqp091-go, confirms in batches of 100", bare, ">= 0.80 (or the previous)"),
	})
}

// runBarePublishes publishes n nudges from conns connections at once, persistent, with
// confirms in batches of benchPublishBatch, and returns the time until the last
// confirm: the broker's ceiling for Mandible's publishers.
func runBarePublishes(t *testing.T, bb benchBroker, conns, n int) time.Duration {
	t.Helper()
	bodies := make([][]byte, 0, n)
	for len(bodies) < n {
		for _, nudge := range benchNudgeList()[:min(benchNudges, n-len(bodies))] {
			body, err := json.Marshal(nudge)
			require.NoError(t, err)
			bodies = append(bodies, body)
		}
	}
	channels := make([]*amqp.Channel, conns)
	for i := range channels {
		conn, ch := bb.dial(t)
		t.Cleanup(func() { _ = conn.Close() })
		require.NoError(t, ch.Confirm(false))
		channels[i] = ch
	}
	key := broker.CommandRoutingKey("poll", "normal")
	var g errgroup.Group
	start := time.Now()
	for i, ch := range channels {
		share := bodies[i*n/conns : (i+1)*n/conns]
		g.Go(func() error { return publishConfirmed(ch, key, share) })
	}
	require.NoError(t, g.Wait())
	return time.Since(start)
}

// publishConfirmed publishes bodies on ch in batches of benchPublishBatch, waiting for
// each batch's confirms before the next.
func publishConfirmed(ch *amqp.Channel, key string, bodies [][]byte) error {
	ctx := context.Background()
	confirms := make([]*amqp.DeferredConfirmation, 0, benchPublishBatch)
	for i := 0; i < len(bodies); i += benchPublishBatch {
		confirms = confirms[:0]
		for _, body := range bodies[i:min(i+benchPublishBatch, len(bodies))] {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, broker.CommandsExchange, key, false, false,
				amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Priority: 5, Body: body})
			if err != nil {
				return err
			}
			confirms = append(confirms, dc)
		}
		for _, dc := range confirms {
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("confirm: ok=%v err=%v", ok, err)
			}
		}
	}
	return nil
}

// queuedNudges is how many nudges wait in the three priority queues (no Thorax consumes
// them here).
func queuedNudges(t *testing.T, ch *amqp.Channel) int {
	t.Helper()
	n := 0
	for _, q := range []string{broker.HighQueue, broker.NormalQueue, broker.LowQueue} {
		info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		require.NoError(t, err)
		n += info.Messages
	}
	return n
}
