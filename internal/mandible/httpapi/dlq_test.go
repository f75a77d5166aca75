package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

const dlqToken = "test-token-0123456789abcdef"

// dlqBundle is the DLQ routes served over a vhost of the test's own, with the
// topology declared, and a channel to put messages on it.
type dlqBundle struct {
	url string
	ch  *amqp.Channel
}

func serveDLQ(t *testing.T, d DLQ) string {
	t.Helper()
	s := &server{logger: slog.New(slog.DiscardHandler), maxBody: 1 << 20}
	mux := http.NewServeMux()
	g := newGate(apitoken.NewKeyring(apitoken.Legacy([]string{dlqToken})), s.logger, nil)
	s.routeAPI(mux, g, d)
	srv := httptest.NewServer(g.authenticate(mux))
	t.Cleanup(srv.Close)
	return srv.URL
}

func setupDLQ(t *testing.T) dlqBundle {
	t.Helper()
	b := testenv.RabbitMQ(t)
	conn, err := amqp.DialConfig(b.URL(), amqp.Config{TLSClientConfig: b.TLSConfig(t)})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, broker.Declare(ch, broker.MantisTopology()))
	cfg := config.Queue{Enabled: true, Host: b.Host, Port: b.Port, Username: b.User, Password: b.Password, VHost: b.VHost,
		CACertPath: b.CACert, ClientCertPath: b.ClientCert, ClientKeyPath: b.ClientKey}
	return dlqBundle{url: serveDLQ(t, broker.NewDLQ(cfg, "mandible dlq test")), ch: ch}
}

// deadLetter publishes body to the high queue and rejects it into mantis.dlq.
func (d dlqBundle) deadLetter(t *testing.T, body string) {
	t.Helper()
	require.NoError(t, d.ch.PublishWithContext(context.Background(), broker.CommandsExchange, "command.poll.high", false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)}))
	require.Eventually(t, func() bool {
		msg, ok, err := d.ch.Get(broker.HighQueue, false)
		require.NoError(t, err)
		if ok {
			require.NoError(t, msg.Nack(false, false))
		}
		return ok
	}, 10*time.Second, 10*time.Millisecond)
}

func (d dlqBundle) depth(t *testing.T, queue string) int {
	t.Helper()
	q, err := d.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

func call(t *testing.T, base, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+dlqToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestDLQListRequeuePurgeOverHTTP(t *testing.T) {
	t.Parallel()
	d := setupDLQ(t)
	nudge := `{"command_id":"0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8e","target":"web-1","mode":"poll","priority":"high","max_retries":3}`
	d.deadLetter(t, nudge)
	d.deadLetter(t, "garbage")
	d.deadLetter(t, nudge)
	// Dead-lettering is asynchronous in the broker: wait until all three arrived.
	require.Eventually(t, func() bool { return d.depth(t, broker.DeadLetterQ) == 3 }, 10*time.Second, 10*time.Millisecond)

	code, body := call(t, d.url, http.MethodGet, "/api/v1/dlq?limit=2", "")
	require.Equal(t, http.StatusOK, code, body)
	require.EqualValues(t, 3, body["depth"])
	msgs := body["messages"].([]any)
	require.Len(t, msgs, 2)
	first := msgs[0].(map[string]any)
	deaths := first["deaths"].([]any)
	require.Len(t, deaths, 1)
	death := deaths[0].(map[string]any)
	require.Equal(t, "rejected", death["reason"])
	require.Equal(t, broker.HighQueue, death["queue"])
	require.EqualValues(t, 1, death["count"])
	require.Equal(t, "web-1", first["nudge"].(map[string]any)["target"])
	require.Contains(t, msgs[1].(map[string]any)["problem"], "decoding nudge")

	code, body = call(t, d.url, http.MethodPost, "/api/v1/dlq/requeue", `{"to":"low","limit":1}`)
	require.Equal(t, http.StatusOK, code, body)
	require.EqualValues(t, 1, body["requeued"])
	require.Equal(t, broker.LowQueue, body["queue"])
	require.Equal(t, 1, d.depth(t, broker.LowQueue))
	require.Equal(t, 2, d.depth(t, broker.DeadLetterQ))

	code, body = call(t, d.url, http.MethodPost, "/api/v1/dlq/purge", `{}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Equal(t, 2, d.depth(t, broker.DeadLetterQ), "nothing is purged without confirm")

	code, body = call(t, d.url, http.MethodPost, "/api/v1/dlq/purge", `{"confirm":true}`)
	require.Equal(t, http.StatusOK, code, body)
	require.EqualValues(t, 2, body["purged"])
	require.Zero(t, d.depth(t, broker.DeadLetterQ))
}

func TestDLQRequestsAreChecked(t *testing.T) {
	t.Parallel()
	url := serveDLQ(t, broker.NewDLQ(config.Queue{}, "never dialled"))
	for _, c := range []struct {
		method, path, body, field string
	}{
		{http.MethodGet, "/api/v1/dlq?limit=-1", "", "limit"},
		{http.MethodGet, "/api/v1/dlq?limit=1001", "", "limit"},
		{http.MethodPost, "/api/v1/dlq/requeue", `{"to":"urgent"}`, "to"},
		{http.MethodPost, "/api/v1/dlq/requeue", `{"to":"high","limit":-2}`, "limit"},
		{http.MethodPost, "/api/v1/dlq/requeue", `{"to":"high","extra":1}`, "extra"},
		{http.MethodPost, "/api/v1/dlq/purge", `{"confirm":false}`, "confirm"},
	} {
		code, body := call(t, url, c.method, c.path, c.body)
		require.Equal(t, http.StatusBadRequest, code, "%s %s %s: %v", c.method, c.path, c.body, body)
		fields := body["error"].(map[string]any)["fields"].([]any)
		require.Equal(t, c.field, fields[0].(map[string]any)["field"], "%s %s", c.path, c.body)
	}
}

func TestDLQWithoutABrokerAnswers503(t *testing.T) {
	t.Parallel()
	url := serveDLQ(t, nil)
	code, body := call(t, url, http.MethodGet, "/api/v1/dlq", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body["error"].(map[string]any)["message"], "[queue] enabled = false")
}

func TestDLQBrokerFailureAnswers502(t *testing.T) {
	t.Parallel()
	b := testenv.RabbitMQ(t)
	// The vhost exists, but nothing declared the topology on it.
	cfg := config.Queue{Enabled: true, Host: b.Host, Port: b.Port, Username: b.User, Password: b.Password, VHost: b.VHost,
		CACertPath: b.CACert, ClientCertPath: b.ClientCert, ClientKeyPath: b.ClientKey}
	code, body := call(t, serveDLQ(t, broker.NewDLQ(cfg, "dlq test")), http.MethodGet, "/api/v1/dlq", "")
	require.Equal(t, http.StatusBadGateway, code)
	require.Contains(t, body["error"].(map[string]any)["message"], "mantis.dlq does not exist")
}
