package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// The broker benchmark measures the nudge path against the real broker (TLS
// with client certificates): nudges published and consumed per second.
const (
	// benchNudges is how many nudges each run publishes and consumes.
	benchNudges = 20000
	// benchPublishBatch is how many nudges one publish sends before waiting
	// for their confirms: a batch of Mandible's dispatcher.
	benchPublishBatch = 100
	// benchPrefetch is the consumers' prefetch, Thorax's default.
	benchPrefetch = 10
	// benchRounds is how many times each side runs per iteration, in turns,
	// so that drift in the machine's load hits them alike.
	benchRounds = 3
	// plainQueue is a classic queue with the command queues' arguments but
	// x-max-priority, bound to mantis.commands with plainKey.
	plainQueue = "bench.commands.plain"
	plainKey   = "bench.plain"
)

// BenchmarkBrokerNudges compares, in the same run and on the same broker:
//
//   - Mantis: Mandible's broker.Client.Publish (persistent, publisher
//     confirms, batches of 100) into mantis.commands, consumed by Thorax's
//     consumer loop (broker.ConsumePriorities with broker.NudgeHandler, the
//     code Thorax runs: three consumers, priority buffers, one dispatcher,
//     nudge decoding, the retry rules, manual acks, prefetch 10). The
//     processor counts nudges instead of claiming their commands through
//     Mandible: the claim is the database's work, which the dispatch
//     benchmarks measure.
//   - bare: amqp091-go alone with the same settings (TLS, persistent,
//     confirms in batches of 100, prefetch 10, manual acks) on the same
//     x-max-priority queue. Goal: Mantis at least 80% of it.
//   - bare without x-max-priority: the same loop on a classic queue without
//     it, to report what the priority queue costs.
//
// Every nudge is normal priority, so every side moves one queue's traffic.
func BenchmarkBrokerNudges(b *testing.B) {
	var mantis, bare, plain time.Duration
	for range b.N {
		scenario(b, "broker-nudges", func(t *testing.T) {
			bb := setupBenchBroker(t)
			for range benchRounds {
				mantis += runMantisNudges(t, bb)
				bare += runBareNudges(t, bb, broker.NormalQueue, broker.CommandRoutingKey("poll", "normal"))
				plain += runBareNudges(t, bb, plainQueue, plainKey)
			}
		})
	}
	n := float64(benchNudges * benchRounds * b.N)
	rate := func(d time.Duration) float64 { return n / d.Seconds() }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rate(mantis), "mantis-nudges/s")
	b.ReportMetric(rate(bare), "bare-nudges/s")
	b.ReportMetric(rate(plain), "bare-plain-nudges/s")
	b.ReportMetric(rate(mantis)/rate(bare), "ratio")
	b.ReportMetric(100*(1-rate(bare)/rate(plain)), "priority-cost-%")
	row := func(name string, d time.Duration, goal string) []string {
		return []string{name, strconv.Itoa(benchNudges), seconds(d / time.Duration(benchRounds*b.N)),
			fmt.Sprintf("%.0f", rate(d)), fmt.Sprintf("%.2f", rate(mantis)/rate(d)), goal}
	}
	logTable(b, [][]string{
		{"nudges, TLS, persistent, confirms, prefetch 10", "per run", "seconds", "per second", "Mantis/this", "goal"},
		row("Mantis: Client.Publish -> Thorax consumer loop", mantis, ""),
		row("bare amqp091-go, x-max-priority 10 queue", bare, ">= 0.80"),
		row("bare amqp091-go, classic queue without x-max-priority", plain, ""),
		{"x-max-priority cost (bare)", "", "", fmt.Sprintf("%.1f%%", 100*(1-rate(bare)/rate(plain))), "", ""},
	})
}

// benchBroker is a vhost with Mantis's topology, declared by Mandible's
// client, and the plain queue beside it.
type benchBroker struct {
	b   testenv.Broker
	cfg config.Queue
}

func setupBenchBroker(t *testing.T) benchBroker {
	t.Helper()
	b := testenv.RabbitMQ(t)
	bb := benchBroker{b: b, cfg: config.Queue{
		Enabled: true, Host: b.Host, Port: b.Port, Username: b.User, Password: b.Password, VHost: b.VHost,
		CACertPath: b.CACert, ClientCertPath: b.ClientCert, ClientKeyPath: b.ClientKey,
	}}
	client := broker.NewClient(bb.cfg, "bench topology", slog.New(slog.DiscardHandler))
	defer client.Close()
	require.NoError(t, client.DeclareTopology(context.Background()))
	conn, ch := bb.dial(t)
	defer conn.Close()
	_, err := ch.QueueDeclare(plainQueue, true, false, false, false, amqp.Table{
		"x-message-ttl": int32(3_600_000), "x-dead-letter-exchange": broker.DeadLetterExch, "x-queue-type": "classic",
	})
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(plainQueue, plainKey, broker.CommandsExchange, false, nil))
	return bb
}

// dial opens a bare connection with the same TLS (the broker's CA, the client
// certificate) and a channel.
func (bb benchBroker) dial(t *testing.T) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	conn, err := amqp.DialConfig(bb.b.URL(), amqp.Config{TLSClientConfig: bb.b.TLSConfig(t), Heartbeat: 10 * time.Second})
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	return conn, ch
}

func benchNudgeList() []broker.Nudge {
	nudges := make([]broker.Nudge, benchNudges)
	for i := range nudges {
		nudges[i] = broker.Nudge{CommandID: uuid.NewString(), Target: fmt.Sprintf("host-%03d", i%100), Mode: "poll",
			Priority: "normal", AssignedInstanceID: uuid.NewString(), MaxRetries: 10}
	}
	return nudges
}

// countingProcessor stands in for the claim: it counts nudges and says when
// it has seen want.
type countingProcessor struct {
	seen atomic.Int64
	want int64
	done chan time.Time
}

func (p *countingProcessor) Process(context.Context, broker.Nudge) error {
	if p.seen.Add(1) == p.want {
		p.done <- time.Now()
	}
	return nil
}

func (p *countingProcessor) GiveUp(context.Context, broker.Nudge, error) {}

// runMantisNudges times benchNudges from the first publish until Thorax's
// consumer loop has handled the last.
func runMantisNudges(t *testing.T, bb benchBroker) time.Duration {
	t.Helper()
	p := &countingProcessor{want: benchNudges, done: make(chan time.Time, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	consuming := make(chan struct{})
	go func() {
		consumed <- broker.ConsumePriorities(ctx, broker.ConsumerOptions{
			Queue: bb.cfg, Name: "bench thorax", TagPrefix: "thorax-bench-" + uuid.NewString(), Prefetch: benchPrefetch,
			Handler: broker.NudgeHandler(p, slog.New(slog.DiscardHandler)), Consuming: func() { close(consuming) },
		})
	}()
	defer func() {
		cancel()
		require.NoError(t, <-consumed)
	}()
	select {
	case <-consuming:
	case err := <-consumed:
		t.Fatalf("consumer stopped: %v", err)
	}

	client := broker.NewClient(bb.cfg, "bench mandible", slog.New(slog.DiscardHandler))
	defer client.Close()
	require.NoError(t, client.Ping(context.Background())) // connect before the clock starts
	nudges := benchNudgeList()
	published := make(chan error, 1)
	start := time.Now()
	go func() {
		for i := 0; i < len(nudges); i += benchPublishBatch {
			if err := client.Publish(context.Background(), nudges[i:min(i+benchPublishBatch, len(nudges))]); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	return waitConsumed(t, start, published, p.done)
}

// runBareNudges times the same with amqp091-go alone, publishing to
// mantis.commands with key and consuming queue.
func runBareNudges(t *testing.T, bb benchBroker, queue, key string) time.Duration {
	t.Helper()
	bodies := make([][]byte, benchNudges)
	for i, n := range benchNudgeList() {
		body, err := json.Marshal(n)
		require.NoError(t, err)
		bodies[i] = body
	}
	cconn, cch := bb.dial(t)
	defer cconn.Close()
	require.NoError(t, cch.Qos(benchPrefetch, 0, false))
	deliveries, err := cch.Consume(queue, "bare-bench-"+uuid.NewString(), false, false, false, false, nil)
	require.NoError(t, err)
	done := make(chan time.Time, 1)
	go func() {
		seen := 0
		for d := range deliveries {
			if d.Ack(false) != nil {
				return
			}
			if seen++; seen == benchNudges {
				done <- time.Now()
			}
		}
	}()

	pconn, pch := bb.dial(t)
	defer pconn.Close()
	require.NoError(t, pch.Confirm(false))
	published := make(chan error, 1)
	start := time.Now()
	go func() { published <- publishConfirmed(pch, key, bodies) }()
	return waitConsumed(t, start, published, done)
}

// waitConsumed waits for the publisher to finish and the consumer to have
// seen every nudge, and returns the time from start to the last one.
func waitConsumed(t *testing.T, start time.Time, published <-chan error, done <-chan time.Time) time.Duration {
	t.Helper()
	timeout := time.After(5 * time.Minute)
	select {
	case err := <-published:
		require.NoError(t, err)
	case <-timeout:
		t.Fatal("publishing did not finish")
	}
	select {
	case at := <-done:
		return at.Sub(start)
	case <-timeout:
		t.Fatal("not every nudge was consumed")
		return 0
	}
}
