package e2e_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// receivedSpan is one span an OTLP receiver got, with the service that sent it.
type receivedSpan struct {
	Service, Name           string
	TraceID, SpanID, Parent string
	Start                   time.Time
	Attrs                   map[string]string
}

// otlpReceiver is an OTLP/HTTP traces endpoint inside the test process.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []receivedSpan
}

// startOTLPReceiver serves /v1/traces, decoding each ExportTraceServiceRequest.
func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		raw, err := io.ReadAll(body)
		var export collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &export)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&export)
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/v1/traces"
	return r
}

func (r *otlpReceiver) add(export *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range export.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range s.GetAttributes() {
					attrs[kv.GetKey()] = attributeText(kv.GetValue())
				}
				r.spans = append(r.spans, receivedSpan{
					Service: service, Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), Parent: hex.EncodeToString(s.GetParentSpanId()),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), Attrs: attrs,
				})
			}
		}
	}
}

// attributeText is an attribute's value as text: strings as they are, the rest
// formatted.
func attributeText(v *commonpb.AnyValue) string {
	switch v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return v.GetStringValue()
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(v.GetIntValue())
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(v.GetBoolValue())
	}
	return v.String()
}

// trace returns the spans of the trace id, by start time.
func (r *otlpReceiver) trace(id string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b receivedSpan) int { return a.Start.Compare(b.Start) })
	return out
}

// find returns the first span named name by service.
func (r *otlpReceiver) find(service, name string) (receivedSpan, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.Service == service && s.Name == name {
			return s, true
		}
	}
	return receivedSpan{}, false
}

// setupTracedExec is setupExec with every process exporting its spans to recv, and
// with a broker between Mandible and Thorax, so that nudges carry trace context too.
func setupTracedExec(t *testing.T, recv *otlpReceiver) execSetup {
	t.Helper()
	ctx := context.Background()
	url := testenv.DatabaseURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	broker := testenv.RabbitMQ(t)
	tracing := fmt.Sprintf("[tracing]\nendpoint = %q\n", recv.URL)
	queue := fmt.Sprintf(`[queue]
enabled = true
host = %q
port = %d
username = %q
password = %q
vhost = %q
ca_cert_path = %q
client_cert_path = %q
client_key_path = %q
`, broker.Host, broker.Port, broker.User, broker.Password, broker.VHost, broker.CACert, broker.ClientCert, broker.ClientKey)
	c := &execCluster{ctx: ctx, dir: dir, pool: pool, certs: certs, heartbeatTimeout: 10 * time.Second,
		extraConfig: map[string]string{"thorax": tracing + queue, "agent": tracing}}
	c.mandibleOptions = replicaOptions{
		ID: uniqueName("traced"), DatabaseURL: url, Temporal: testenv.TemporalServer(t), PollInterval: "2s",
		Broker: &broker, Env: []string{"MANTIS_TRACING_ENDPOINT=" + recv.URL},
	}
	c.mandible = startSecureReplica(t, c.mandibleOptions, certs, c.heartbeatTimeout)
	s := execSetup{execCluster: c, thorax: c.startThorax(t)}
	s.poll = c.startPollAgent(t, s.thorax)
	s.listen = c.startListenAgent(t)
	s.instance = c.waitRegistered(t, s.thorax)
	c.registerListenTarget(t, s.listen)
	c.waitPollTarget(t, s.poll, s.instance)
	return s
}

// One deployment is one trace: the API call that creates it, its workflow and
// activities, each command's delivery and nudge, Thorax's hand-off, the agent's run
// and the result's store in Mandible, across the four processes, for a poll and a
// listen target.
func TestDeploymentIsOneTraceAcrossProcesses(t *testing.T) {
	recv := startOTLPReceiver(t)
	s := setupTracedExec(t, recv)
	r := s.mandible.replica
	spec := fmt.Sprintf(`{"name":"traced","targets":[%q,%q],"steps":[{"name":"hello","command":"echo traced"}]}`,
		s.poll.Name, s.listen.Name)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	waitDeployment(t, r, created["id"].(string), "succeeded")

	var root receivedSpan
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var ok bool
		root, ok = recv.find("mantis-mandible", "POST /api/v1/deployments")
		require.True(ct, ok, "no span of the create call")
	}, 30*time.Second, 200*time.Millisecond)

	byService := func(spans []receivedSpan, service, name string) []receivedSpan {
		var out []receivedSpan
		for _, sp := range spans {
			if sp.Service == service && sp.Name == name {
				out = append(out, sp)
			}
		}
		return out
	}
	var spans []receivedSpan
	// The batching exporters send within seconds; the results' stores come last.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		spans = recv.trace(root.TraceID)
		require.Len(ct, byService(spans, "mantis-mandible", "RunActivity:AdvanceStep"), 1)
		require.Len(ct, byService(spans, "mantis-mandible", "command.deliver"), 2)
		require.Len(ct, byService(spans, "mantis-thorax", "command.nudge"), 2)
		require.Len(ct, byService(spans, "mantis-thorax", "command.handoff"), 2)
		require.Len(ct, byService(spans, "mantis-agent", "command.run"), 2)
		require.Len(ct, byService(spans, "mantis-agent", "mantis.v1.AgentService/RunCommand"), 1)
		require.Len(ct, byService(spans, "mantis-thorax", "mantis.v1.ThoraxService/ReportResult"), 1)
		require.Len(ct, byService(spans, "mantis-mandible", "mantis.v1.MandibleService/StoreCommandResult"), 2)
		// The workflow's span ends, and is exported, only when the workflow has: wait
		// until every span's parent has arrived.
		have := map[string]bool{}
		for _, sp := range spans {
			have[sp.SpanID] = true
		}
		for _, sp := range spans {
			if sp.Parent != "" && sp.Parent != strings.Repeat("0", 16) {
				require.True(ct, have[sp.Parent], "span %s (%s): its parent has not arrived", sp.Name, sp.Service)
			}
		}
	}, 60*time.Second, 500*time.Millisecond)
	t.Logf("trace %s:\n%s", root.TraceID, renderTrace(spans))

	parents := map[string]receivedSpan{}
	for _, sp := range spans {
		parents[sp.SpanID] = sp
	}
	// ancestors lists the names of a span's ancestors, nearest first, up to the root;
	// every parent must be in the trace.
	ancestors := func(sp receivedSpan) []string {
		var names []string
		for sp.Parent != "" && sp.Parent != strings.Repeat("0", 16) {
			p, ok := parents[sp.Parent]
			require.True(t, ok, "span %s (%s) has a parent outside the trace", sp.Name, sp.Service)
			names = append(names, p.Name)
			sp = p
		}
		return names
	}
	for _, run := range byService(spans, "mantis-agent", "command.run") {
		up := ancestors(run)
		require.Equal(t, "POST /api/v1/deployments", up[len(up)-1], "the trace's root is the create call")
		require.Contains(t, up, "command.handoff")
		require.Contains(t, up, "RunActivity:AdvanceStep")
		require.Contains(t, []string{s.poll.Name, s.listen.Name}, run.Attrs["mantis.target"])
		require.Equal(t, "0", run.Attrs["mantis.command.exit_code"])
	}
	for _, store := range byService(spans, "mantis-mandible", "mantis.v1.MandibleService/StoreCommandResult") {
		require.Contains(t, ancestors(store), "command.handoff", "a result's store continues its command's hand-off")
	}
	for _, nudge := range byService(spans, "mantis-thorax", "command.nudge") {
		require.Equal(t, "command.deliver", ancestors(nudge)[0], "a nudge continues its command's delivery")
	}
}

// renderTrace prints spans as an indented tree of "name [service]".
func renderTrace(spans []receivedSpan) string {
	children := map[string][]receivedSpan{}
	ids := map[string]bool{}
	for _, sp := range spans {
		ids[sp.SpanID] = true
	}
	var roots []receivedSpan
	for _, sp := range spans {
		if ids[sp.Parent] {
			children[sp.Parent] = append(children[sp.Parent], sp)
		} else {
			roots = append(roots, sp)
		}
	}
	var b strings.Builder
	var walk func(sp receivedSpan, depth int)
	walk = func(sp receivedSpan, depth int) {
		fmt.Fprintf(&b, "%s%s [%s]\n", strings.Repeat("  ", depth), sp.Name, sp.Service)
		for _, c := range children[sp.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, sp := range roots {
		walk(sp, 0)
	}
	return b.String()
}
