package analysis_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/analysis"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// brokerBundle is a database bundle plus a broker vhost of the test's own, a channel
// on it in confirm mode, and the consumer running.
type brokerBundle struct {
	*bundle
	broker testenv.Broker
	ch     *amqp.Channel
}

func setupBroker(t *testing.T, declare bool) *brokerBundle {
	t.Helper()
	b := &brokerBundle{bundle: setup(t), broker: testenv.RabbitMQ(t)}
	conn, err := amqp.DialConfig(b.broker.URL(), amqp.Config{TLSClientConfig: b.broker.TLSConfig(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	b.ch, err = conn.Channel()
	require.NoError(t, err)
	require.NoError(t, b.ch.Confirm(false))
	if declare {
		b.declare(t)
	}
	return b
}

func (b *brokerBundle) declare(t *testing.T) {
	t.Helper()
	require.NoError(t, broker.Declare(b.ch, broker.MantisTopology()))
}

func (b *brokerBundle) queueConfig() config.Queue {
	return config.Queue{
		Enabled: true, Host: b.broker.Host, Port: b.broker.Port, Username: b.broker.User, Password: b.broker.Password,
		VHost: b.broker.VHost, CACertPath: b.broker.CACert, ClientCertPath: b.broker.ClientCert, ClientKeyPath: b.broker.ClientKey,
	}
}

// start runs the consumer and the processor until the test ends.
func (b *brokerBundle) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	consumed := make(chan error, 1)
	processed := make(chan error, 1)
	go func() { consumed <- analysis.Consume(ctx, b.queueConfig(), b.processor) }()
	go func() { processed <- b.processor.Run(ctx, time.Second) }()
	t.Cleanup(func() {
		cancel()
		for _, c := range []chan error{consumed, processed} {
			select {
			case err := <-c:
				require.NoError(t, err)
			case <-time.After(15 * time.Second):
				t.Error("consumer or processor did not stop with its context")
			}
		}
	})
}

func (b *brokerBundle) publish(t *testing.T, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	dc, err := b.ch.PublishWithDeferredConfirmWithContext(ctx, broker.AnalysisExchange, broker.AnalysisRoutingKey, true, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(body),
	})
	require.NoError(t, err)
	ok, err := dc.WaitContext(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the broker confirms the request")
}

// waitDone waits for the external request's analysis to be done and returns it.
func (b *brokerBundle) waitDone(t *testing.T, requestID string) schema.Analysis {
	t.Helper()
	var a schema.Analysis
	require.Eventually(t, func() bool {
		var err error
		a, err = schema.AnalysisByExternalID(b.ctx, b.pool, requestID)
		return err == nil && a.Status == domain.AnalysisDone
	}, 30*time.Second, 50*time.Millisecond, "analysis of %s never done", requestID)
	return a
}

func TestConsumeStoresRequestsAndDeadLettersMalformedOnes(t *testing.T) {
	t.Parallel()
	b := setupBroker(t, true)
	b.start(t)

	b.publish(t, `{"request_id": "ci-4711", "output": "+ helm upgrade web ./chart\n/bin/sh: 1: helm: not found\n", "exit_code": 127, "timed_out": false, "reply_to": "ci.results"}`)
	b.publish(t, `{"output": "Killed", "exit_code": 137}`)
	b.publish(t, `this is not json`)
	b.publish(t, `{"request_id": "ci-4712", "exit_code": 1}`)
	b.publish(t, `{"request_id": "ci-4713", "output": "", "exit_code": 137, "timed_out": true}`)

	a := b.waitDone(t, "ci-4711")
	require.Equal(t, schema.AnalysisExternal, a.Source)
	require.Nil(t, a.CommandID)
	require.Equal(t, analysis.CategoryCommandNotFound, a.Category)
	require.Equal(t, "command not found: helm", a.Summary)
	require.Contains(t, a.Suggestion, "Install helm")
	require.Equal(t, analysis.RefinedByRules, a.RefinedBy)

	timedOut := b.waitDone(t, "ci-4713")
	require.Equal(t, analysis.CategoryTimeout, timedOut.Category, "the timed_out flag reaches the classifier")

	// The three malformed messages end up in mantis.dlq, rejected from the requests queue.
	var dead []amqp.Delivery
	require.Eventually(t, func() bool {
		d, ok, err := b.ch.Get(broker.DeadLetterQ, true)
		if err == nil && ok {
			dead = append(dead, d)
		}
		return len(dead) == 3
	}, 30*time.Second, 50*time.Millisecond)
	bodies := map[string]bool{}
	for _, d := range dead {
		bodies[string(d.Body)] = true
		deaths, ok := d.Headers["x-death"].([]any)
		require.True(t, ok, "dead-lettered messages carry x-death")
		death := deaths[0].(amqp.Table)
		require.Equal(t, "rejected", death["reason"])
		require.Equal(t, broker.AnalysisQueue, death["queue"])
	}
	require.Equal(t, map[string]bool{
		`{"output": "Killed", "exit_code": 137}`:    true,
		`this is not json`:                          true,
		`{"request_id": "ci-4712", "exit_code": 1}`: true,
	}, bodies)
	_, err := schema.AnalysisByExternalID(b.ctx, b.pool, "ci-4712")
	require.ErrorIs(t, err, schema.ErrNotFound)
	require.Contains(t, b.logs.String(), "rejected malformed analysis request")

	// Everything was settled: nothing waits in the requests queue.
	q, err := b.ch.QueueDeclarePassive(broker.AnalysisQueue, true, false, false, false, nil)
	require.NoError(t, err)
	require.Zero(t, q.Messages)
}

func TestConsumeStoresARequestIDOnce(t *testing.T) {
	t.Parallel()
	b := setupBroker(t, true)
	b.start(t)

	b.publish(t, `{"request_id": "job-1", "output": "No space left on device", "exit_code": 1}`)
	first := b.waitDone(t, "job-1")
	b.publish(t, `{"request_id": "job-1", "output": "something else entirely", "exit_code": 2}`)
	b.publish(t, `{"request_id": "job-2", "output": "cat: VERSION: No such file or directory", "exit_code": 1}`)
	b.waitDone(t, "job-2")

	again, err := schema.AnalysisByExternalID(b.ctx, b.pool, "job-1")
	require.NoError(t, err)
	require.Equal(t, first, again, "a repeated request_id changes nothing")
	require.Equal(t, analysis.CategoryDiskFull, again.Category)

	// The repeat was acknowledged, not dead-lettered.
	q, err := b.ch.QueueDeclarePassive(broker.DeadLetterQ, true, false, false, false, nil)
	require.NoError(t, err)
	require.Zero(t, q.Messages)
}

// The consumer waits for the queue to be declared, and comes back when the broker
// drops its connection.
func TestConsumeReconnects(t *testing.T) {
	t.Parallel()
	b := setupBroker(t, false)
	b.start(t)
	require.Eventually(t, func() bool {
		return b.logs.Contains("analysis consumer disconnected")
	}, 30*time.Second, 50*time.Millisecond, "consuming an undeclared queue fails")
	b.declare(t)
	b.publish(t, `{"request_id": "before", "output": "Permission denied", "exit_code": 1}`)
	b.waitDone(t, "before")

	// Close the consumer's connection from the broker's side.
	vh := url.PathEscape(b.broker.VHost)
	var name string
	require.Eventually(t, func() bool {
		body, err := b.broker.Management(b.ctx, http.MethodGet, "/vhosts/"+vh+"/connections", nil)
		if err != nil {
			return false
		}
		var conns []struct {
			Name             string `json:"name"`
			UserProvidedName string `json:"user_provided_name"`
		}
		if json.Unmarshal(body, &conns) != nil {
			return false
		}
		for _, c := range conns {
			if c.UserProvidedName == analysis.ConsumerConnectionName {
				name = c.Name
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "the consumer's connection is listed")
	_, err := b.broker.Management(b.ctx, http.MethodDelete, "/connections/"+url.PathEscape(name), nil)
	require.NoError(t, err)

	b.publish(t, `{"request_id": "after", "output": "fatal: Authentication failed for 'https://git.example.com/web.git/'", "exit_code": 128}`)
	a := b.waitDone(t, "after")
	require.Equal(t, analysis.CategoryAuthentication, a.Category)
	require.GreaterOrEqual(t, b.logs.Count("consuming analysis requests"), 2, "the consumer reconnected")
}

func TestDecodeRequestNamesTheProblem(t *testing.T) {
	t.Parallel()
	r, err := analysis.DecodeRequest([]byte(`{"request_id": "r1", "output": "a\u0000b", "exit_code": 3, "timed_out": true, "reply_to": "x"}`))
	require.NoError(t, err)
	require.Equal(t, analysis.Request{RequestID: "r1", Output: "ab", ExitCode: 3, TimedOut: true}, r, "NUL cannot be stored and is dropped")

	for body, want := range map[string]string{
		`[1, 2]`: "decoding analysis request",
		`{"request_id": "r1", "output": "x", "exit_code": "1"}`: "decoding analysis request",
		`{"output": "x"}`:                       "request_id is required",
		`{"request_id": "  ", "output": "x"}`:   "request_id is required",
		`{"request_id": "a\nb", "output": "x"}`: "request_id must not contain control characters",
		`{"request_id": "r1"}`:                  "output is required",
		`{"request_id": "r1", "output": null}`:  "output is required",
	} {
		_, err := analysis.DecodeRequest([]byte(body))
		require.ErrorContains(t, err, want, body)
	}
	_, err = analysis.DecodeRequest([]byte(`{"request_id": "` + strings.Repeat("r", 201) + `", "output": "x"}`))
	require.ErrorContains(t, err, "request_id must be at most 200 characters, got 201")
}
