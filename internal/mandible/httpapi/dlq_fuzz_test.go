package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// dlqQueues are the queues a DLQ call may change.
var dlqQueues = []string{broker.DeadLetterQ, broker.CommandQueue("high"), broker.CommandQueue("normal"), broker.CommandQueue("low")}

// fuzzDLQ is the API with a real DLQ on a vhost of its own, the Mantis topology
// declared, and a channel to look at the queues with.
type fuzzDLQ struct {
	fuzzAPI
	ch *amqp.Channel
}

func newFuzzDLQ(f *testing.F) fuzzDLQ {
	f.Helper()
	b := testenv.RabbitMQ(f)
	conn, err := amqp.DialConfig(b.URL(), amqp.Config{TLSClientConfig: b.TLSConfig(f)})
	require.NoError(f, err)
	f.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(f, err)
	require.NoError(f, broker.Declare(ch, broker.MantisTopology()))
	cfg := config.Queue{Enabled: true, Host: b.Host, Port: b.Port, Username: b.User, Password: b.Password, VHost: b.VHost,
		CACertPath: b.CACert, ClientCertPath: b.ClientCert, ClientKeyPath: b.ClientKey}
	api := newFuzzAPI(f, func(o *httpapi.Options) { o.DLQ = broker.NewDLQ(cfg, "mandible dlq fuzz") })
	return fuzzDLQ{fuzzAPI: api, ch: ch}
}

// depths returns the message count of each queue a DLQ call may change.
func (d fuzzDLQ) depths(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, name := range dlqQueues {
		q, err := d.ch.QueueDeclarePassive(name, true, false, false, false, nil)
		require.NoError(t, err)
		out[name] = q.Messages
	}
	return out
}

// fillDLQ puts one message straight on the DLQ when it is empty, so that there is
// something for a wrongly accepted call to move.
func (d fuzzDLQ) fillDLQ(t testing.TB) {
	t.Helper()
	q, err := d.ch.QueueDeclarePassive(broker.DeadLetterQ, true, false, false, false, nil)
	require.NoError(t, err)
	if q.Messages > 0 {
		return
	}
	require.NoError(t, d.ch.PublishWithContext(context.Background(), "", broker.DeadLetterQ, false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(`{"command_id":"c","target":"web-1","mode":"poll","priority":"normal"}`)}))
	require.Eventually(t, func() bool {
		q, err := d.ch.QueueDeclarePassive(broker.DeadLetterQ, true, false, false, false, nil)
		return err == nil && q.Messages == 1
	}, 10*time.Second, 10*time.Millisecond)
}

// fuzzDLQCall posts body to path: a refusal names its fields and moves no message.
// It returns the answer when the call was accepted, nil otherwise.
func (d fuzzDLQ) fuzzDLQCall(t *testing.T, path string, body []byte) []byte {
	t.Helper()
	d.fillDLQ(t)
	before := d.depths(t)
	code, eb, raw := d.post(t, path, body)
	if code != http.StatusOK {
		requireClearRefusal(t, code, eb, raw)
		require.Equal(t, before, d.depths(t), "a refused DLQ call moved messages: %s", raw)
		return nil
	}
	return raw
}

// FuzzDLQRequeueBody posts any body to POST /api/v1/dlq/requeue.
func FuzzDLQRequeueBody(f *testing.F) {
	for _, s := range []string{`{"to":"high","limit":1}`, `{"to":"low"}`, `{"to":"urgent"}`, `{"to":"normal","limit":-1}`,
		`{"to":1}`, `{"limit":99999999999999999999}`, `{"to":"high","x":1}`, `{}`, `null`, ``, `{`} {
		f.Add([]byte(s))
	}
	d := newFuzzDLQ(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		raw := d.fuzzDLQCall(t, "/api/v1/dlq/requeue", body)
		if raw == nil {
			return
		}
		var res api.DLQRequeueResult
		require.NoError(t, json.Unmarshal(raw, &res))
		require.Contains(t, []string{"high", "normal", "low"}, res.To)
		require.Equal(t, broker.CommandQueue(res.To), res.Queue)
		require.LessOrEqual(t, res.Requeued, 1, "more messages requeued than the DLQ held")
	})
}

// FuzzDLQPurgeBody posts any body to POST /api/v1/dlq/purge.
func FuzzDLQPurgeBody(f *testing.F) {
	for _, s := range []string{`{"confirm":true}`, `{"confirm":false}`, `{"confirm":"yes"}`, `{"confirm":true,"all":1}`, `{}`, `null`, ``, `[`} {
		f.Add([]byte(s))
	}
	d := newFuzzDLQ(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		raw := d.fuzzDLQCall(t, "/api/v1/dlq/purge", body)
		if raw == nil {
			return
		}
		var res api.DLQPurgeResult
		require.NoError(t, json.Unmarshal(raw, &res))
		require.Equal(t, 1, res.Purged)
		require.Zero(t, d.depths(t)[broker.DeadLetterQ])
	})
}
