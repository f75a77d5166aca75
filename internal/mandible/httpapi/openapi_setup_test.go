package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/mandible/sse"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// Tokens of the contract test, one per scope.
const (
	contractRead   = "contract-read-0123456789abcdef"
	contractDeploy = "contract-deploy-0123456789abcdef"
	contractAdmin  = "contract-admin-0123456789abcdef"
)

// contractBundle is Mandible's HTTP API on real PostgreSQL, Temporal, RabbitMQ and
// event streams, with the document's router to validate each exchange.
type contractBundle struct {
	doc    *openapi3.T
	srv    *httptest.Server
	noDLQ  *httptest.Server // the same API without a broker
	router routers.Router
	// answered counts, per "METHOD /path" of the document, the statuses seen.
	answered map[string]map[int]bool
	// pool is the API's database, for a test that records a state the API cannot.
	pool *pgxpool.Pool
}

func setupContract(t *testing.T) *contractBundle {
	t.Helper()
	pool := testenv.MigratedPool(t)
	tsrv := testenv.TemporalServer(t)
	tc, err := client.NewLazyClient(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	keys := apitoken.NewKeyring([]apitoken.Token{
		{Name: "viewer", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash(contractRead)},
		{Name: "ci", Scope: apitoken.ScopeDeploy, SHA256: apitoken.Hash(contractDeploy)},
		{Name: "ops", Scope: apitoken.ScopeAdmin, SHA256: apitoken.Hash(contractAdmin)},
	})
	ctx, cancel := context.WithCancel(context.Background())
	events := sse.NewBroker(sse.BrokerOptions{DB: pool, PollInterval: 10 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); _ = events.Run(ctx) }()
	opts := httpapi.Options{DB: pool, Keyring: keys, MaxBodyBytes: 4096, HeartbeatTimeout: time.Hour,
		Registry: prometheus.NewRegistry(), Events: sse.NewHandler(events, sse.HandlerOptions{}), DLQ: realDLQ(t),
		Temporal: tc, Namespace: tsrv.Namespace, DeploymentQueue: tsrv.TaskQueue,
		Checks: map[string]httpapi.Check{"database": func(ctx context.Context) error { return pool.Ping(ctx) }}}
	srv := httptest.NewServer(httpapi.New(opts))
	opts.DLQ, opts.Registry = nil, nil
	noDLQ := httptest.NewServer(httpapi.New(opts))
	t.Cleanup(func() { srv.Close(); noDLQ.Close(); cancel(); <-done })
	doc := loadDocument(t)
	doc.Servers = openapi3.Servers{{URL: srv.URL}, {URL: noDLQ.URL}}
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return &contractBundle{doc: doc, srv: srv, noDLQ: noDLQ, router: router, answered: map[string]map[int]bool{}, pool: pool}
}

// realDLQ is the DLQ tools on a vhost of the test's own with the topology declared.
func realDLQ(t *testing.T) httpapi.DLQ {
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
	return broker.NewDLQ(cfg, "mandible contract test")
}

// exchange is one call of the contract test and the status it must answer.
type exchange struct {
	method, path, body string
	token              string // "" sends none
	contentType        string // default application/json when there is a body
	header             http.Header
	want               int
	// invalid marks a request the document itself refuses (a bad body, no token):
	// only the answer is validated.
	invalid bool
	// stream marks an event stream: its answer's body is not read.
	stream bool
	// base is the server called, the one with a broker when empty.
	base string
}

// request builds ex's request.
func (b *contractBundle) request(ctx context.Context, t *testing.T, ex exchange) *http.Request {
	t.Helper()
	base := ex.base
	if base == "" {
		base = b.srv.URL
	}
	req, err := http.NewRequestWithContext(ctx, ex.method, base+ex.path, strings.NewReader(ex.body))
	require.NoError(t, err)
	for k, v := range ex.header {
		req.Header[k] = v
	}
	if ex.body != "" {
		ct := ex.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if ex.token != "" {
		req.Header.Set("Authorization", "Bearer "+ex.token)
	}
	return req
}

// call makes ex against the real handlers, validating the request (unless ex is
// invalid) and the answer against the document, and returns the answer's body.
func (b *contractBundle) call(t *testing.T, ex exchange) []byte {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := b.request(ctx, t, ex)
	route, params, err := b.router.FindRoute(req)
	require.NoError(t, err, "%s %s is not in the document", ex.method, ex.path)
	input := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if !ex.invalid {
		require.NoError(t, openapi3filter.ValidateRequest(ctx, input), "%s %s", ex.method, ex.path)
		req = b.request(ctx, t, ex) // the validation read the body
		input.Request = req
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body []byte
	if !ex.stream {
		body, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
	}
	require.Equal(t, ex.want, resp.StatusCode, "%s %s: %s", ex.method, ex.path, body)
	if ex.stream {
		requireDocumentedContentType(t, route, resp)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: ex.stream, MultiError: true}}
	require.NoError(t, openapi3filter.ValidateResponse(ctx, out), "%s %s answered %d: %s", ex.method, ex.path, resp.StatusCode, body)
	key := route.Method + " " + route.Path
	if b.answered[key] == nil {
		b.answered[key] = map[int]bool{}
	}
	b.answered[key][resp.StatusCode] = true
	return body
}
