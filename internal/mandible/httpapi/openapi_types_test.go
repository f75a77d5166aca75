package httpapi_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/version"
	"github.com/mantis-deploy/mantis/schema"
)

// Every route Mandible serves is in the document with the scope it needs, and every
// path of the document is routed: neither can change without the other.
func TestDocumentRoutesMatchServer(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	ops := operations(doc)
	routed := map[string]bool{}
	for _, rt := range httpapi.Routes(tc) {
		method, _, _ := strings.Cut(rt.Pattern, " ")
		key := method + " " + docPath(rt.Pattern)
		routed[key] = true
		op, ok := ops[key]
		require.True(t, ok, "%s is served but not in api/openapi.yaml", rt.Pattern)
		require.Equal(t, rt.Scope, scopeOf(doc, op), "the scope of %s", rt.Pattern)
	}
	for key := range ops {
		if strings.HasPrefix(docPath(key), "/sse/") {
			continue // internal/mandible/sse's routes: TestRoutesAnswerAsDocumented calls each
		}
		require.True(t, routed[key], "%s is in api/openapi.yaml but not served", key)
	}
	for _, key := range []string{"GET /sse/deployments/{id}", "GET /sse/events"} {
		require.Contains(t, ops, key)
	}
}

// schemaTypes maps each object schema of the document to the Go type it describes.
var schemaTypes = map[string]reflect.Type{
	"Problem": reflect.TypeFor[api.Problem](), "ErrorDetail": reflect.TypeFor[api.ErrorDetail](),
	"FieldProblem": reflect.TypeFor[api.FieldProblem](), "CreatedDeployment": reflect.TypeFor[api.CreatedDeployment](),
	"DeploymentAnswer": reflect.TypeFor[api.DeploymentAnswer](), "DeploymentList": reflect.TypeFor[api.DeploymentList](),
	"CancelAnswer": reflect.TypeFor[api.CancelAnswer](), "Deployment": reflect.TypeFor[api.Deployment](),
	"Step": reflect.TypeFor[api.Step](), "StepCounts": reflect.TypeFor[api.StepCounts](),
	"TargetResult": reflect.TypeFor[api.TargetResult](), "Analysis": reflect.TypeFor[api.Analysis](),
	"NewDispatchRequest": reflect.TypeFor[api.NewDispatchRequest](), "EnqueueBody": reflect.TypeFor[api.EnqueueBody](),
	"EnqueueAnswer": reflect.TypeFor[api.EnqueueAnswer](), "EnqueuedRequest": reflect.TypeFor[api.EnqueuedRequest](),
	"DispatchRequestList": reflect.TypeFor[api.DispatchRequestList](), "DispatchRequest": reflect.TypeFor[api.DispatchRequest](),
	"NewTarget": reflect.TypeFor[api.NewTarget](), "TargetList": reflect.TypeFor[api.TargetList](),
	"Target": reflect.TypeFor[api.Target](), "ThoraxInstanceList": reflect.TypeFor[api.ThoraxInstanceList](),
	"ThoraxInstance": reflect.TypeFor[api.ThoraxInstance](), "DLQRequeueBody": reflect.TypeFor[api.DLQRequeueBody](),
	"DLQRequeueResult": reflect.TypeFor[api.DLQRequeueResult](), "DLQPurgeBody": reflect.TypeFor[api.DLQPurgeBody](),
	"DLQPurgeResult": reflect.TypeFor[api.DLQPurgeResult](), "DLQListing": reflect.TypeFor[broker.DLQListing](),
	"DLQMessage": reflect.TypeFor[broker.DLQMessage](), "Health": reflect.TypeFor[api.Health](),
	"Readiness": reflect.TypeFor[api.Readiness](), "BuildInfo": reflect.TypeFor[version.Info](),
	"OutputPage": reflect.TypeFor[api.OutputPage](), "OutputChunk": reflect.TypeFor[api.OutputChunk](),
	"Limit": reflect.TypeFor[api.Limit](), "LimitList": reflect.TypeFor[api.LimitList](),
	"Decision": reflect.TypeFor[api.Decision](), "DecisionList": reflect.TypeFor[api.DecisionList](),
	"DecisionRequest": reflect.TypeFor[api.DecisionRequest](), "Waiting": reflect.TypeFor[api.Waiting](),
	"ResumeRequest": reflect.TypeFor[api.ResumeRequest](), "ResumedDeployment": reflect.TypeFor[api.ResumedDeployment](),
	"FieldWarning": reflect.TypeFor[api.FieldWarning](),
}

// jsonFields returns the JSON names of t's fields and those that are required (no
// omitempty).
func jsonFields(t reflect.Type) (names, required []string) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	sort.Strings(names)
	sort.Strings(required)
	return names, required
}

// Each object schema has exactly the JSON fields of its Go type, and requires those
// the type always writes: the Go types are the source.
func TestSchemasMatchGoTypes(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	for name, s := range doc.Components.Schemas {
		if s.Value.Type.Is("object") && name != "Links" {
			require.Contains(t, schemaTypes, name, "schema %s describes no Go type", name)
		}
	}
	for name, typ := range schemaTypes {
		s := doc.Components.Schemas[name]
		require.NotNil(t, s, "no schema %s", name)
		names, required := jsonFields(typ)
		var props []string
		for p := range s.Value.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		req := slices.Clone(s.Value.Required)
		sort.Strings(req)
		require.Equal(t, names, props, "the properties of %s", name)
		require.Equal(t, required, req, "the required properties of %s", name)
	}
}

// enumOf returns the enum of a component schema, or of one of its properties
// ("Schema.property"), following a reference.
func enumOf(t *testing.T, doc *openapi3.T, at string) []string {
	t.Helper()
	name, prop, _ := strings.Cut(at, ".")
	s := doc.Components.Schemas[name].Value
	if prop != "" {
		s = s.Properties[prop].Value
	}
	var out []string
	for _, v := range s.Enum {
		out = append(out, v.(string))
	}
	return out
}

// Every enum of the document is the list of the Go constants it names.
func TestEnumsMatchGoConstants(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	codes := make([]string, len(api.ErrorCodes))
	for i, c := range api.ErrorCodes {
		codes[i] = string(c)
	}
	enums := map[string][]string{
		"DeploymentStatus":               domain.DeploymentStatuses,
		"Priority":                       domain.Priorities,
		"Step.status":                    domain.StepStatuses,
		"TargetResult.status":            {schema.TargetQueued, schema.TargetRunning, schema.TargetSucceeded, schema.TargetFailed},
		"Analysis.status":                domain.AnalysisStatuses,
		"DispatchRequest.status":         domain.DispatchStatuses,
		"DispatchRequest.command_status": domain.CommandStatuses,
		"NewDispatchRequest.priority":    append(slices.Clone(domain.Priorities), ""),
		"TargetMode":                     {schema.ModePoll, schema.ModeListen},
		"ErrorCode":                      codes,
		"CancelAnswer.status":            {api.StatusCancelling},
		"Health.status":                  {api.StatusOK},
	}
	for at, want := range enums {
		require.ElementsMatch(t, want, enumOf(t, doc, at), at)
	}
}

// filledValues are values of the response types with every field set.
func filledValues() map[string]any {
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	id, s, n, code := uuid.New(), "x", 3, 2
	links := api.Links{api.LinkSelf: "/a", api.LinkCancel: "/b", api.LinkEvents: "/c", api.LinkTemporal: "http://d"}
	target := api.TargetResult{Target: "web-1", Status: schema.TargetFailed, ExitCode: &code, OutputTail: "out", Truncated: true,
		Error: "e", Attempts: 1, StartedAt: &now, FinishedAt: &now,
		Analysis: &api.Analysis{Status: domain.AnalysisDone, Category: &s, Summary: &s, Suggestion: &s}}
	step := api.Step{Position: 1, Name: "s", Command: "true", Status: domain.StepFailed, ContinueOnError: true, StartedAt: &now,
		FinishedAt: &now, Targets: []api.TargetResult{target}, Counts: api.StepCounts{Queued: 1, Running: 1, Succeeded: 1, Failed: 1}}
	dep := api.Deployment{ID: id, Name: "d", Priority: domain.PriorityHigh, Status: domain.DeploymentFailed, IdempotencyKey: &s,
		CreatedBy: &s, Error: &s, CreatedAt: now, StartedAt: &now, FinishedAt: &now, Spec: json.RawMessage(`{"name":"d"}`),
		Steps: []api.Step{step}}
	req := api.DispatchRequest{ID: id, IdempotencyKey: "k", Target: "t", DeploymentID: &id, StepPosition: &n, Command: "c",
		Priority: domain.PriorityLow, Status: domain.StatusDispatched, Attempts: 1, MaxAttempts: 11, CreatedAt: now, ExpiresAt: now,
		NextAttemptAt: now, ClaimedBy: &s, ClaimedAt: &now, ClaimEpoch: 4, DispatchedAt: &now, FinishedAt: &now, LastError: &s,
		CommandID: &id, CommandStatus: &s, Reason: "r"}
	addr := "h:1"
	tgt := api.Target{ID: id, Name: "t", Mode: schema.ModeListen, Address: &addr, Labels: map[string]string{"a": "b"},
		AssignedInstanceID: &id, CreatedAt: now, UpdatedAt: now}
	*req.CommandStatus = domain.CommandLost
	return map[string]any{
		"Problem": api.NewProblem(400, api.CodeInvalidSpec, "/api/v1/deployments", "bad", api.FieldProblem{Field: "f", Problem: "p"}),
		"CreatedDeployment": api.CreatedDeployment{ID: id, Status: domain.DeploymentPending, Created: true, Links: links,
			Warnings: []api.FieldWarning{{Field: "steps[0].env_secret.PIN", Warning: "w"}}},
		"DeploymentAnswer":    api.DeploymentAnswer{Deployment: dep, Links: links},
		"DeploymentList":      api.DeploymentList{Deployments: []api.Deployment{dep}, Next: "/n"},
		"CancelAnswer":        api.CancelAnswer{ID: id, Status: api.StatusCancelling, Links: links},
		"EnqueueAnswer":       api.EnqueueAnswer{Requests: []api.EnqueuedRequest{{ID: id, IdempotencyKey: "k", Created: true, ExpiresAt: now}}},
		"DispatchRequestList": api.DispatchRequestList{Requests: []api.DispatchRequest{req}, Next: "/n"},
		"TargetList":          api.TargetList{Targets: []api.Target{tgt}, Next: "/n"},
		"ThoraxInstanceList":  api.ThoraxInstanceList{Instances: []api.ThoraxInstance{{ID: id, Name: "thorax-1", Status: "live", Live: true, RegisteredAt: now, LastHeartbeatAt: now, DiedAt: &now, Targets: 2}}},
		"DLQRequeueResult":    api.DLQRequeueResult{Requeued: 1, To: domain.PriorityHigh, Queue: "q"},
		"DLQPurgeResult":      api.DLQPurgeResult{Purged: 1},
		"Health":              api.Health{Status: api.StatusOK},
		"Readiness":           api.Readiness{Ready: true, Checks: map[string]string{"database": api.StatusOK}},
		"BuildInfo":           version.Info{Version: "v1.4.0", Commit: "0123456789ab", GoVersion: "go1.26.8", Modified: true},
	}
}

// A value of each response type with every field set is valid by its schema.
func TestFilledValuesAreValid(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	for name, v := range filledValues() {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		var decoded any
		require.NoError(t, json.Unmarshal(b, &decoded))
		s := doc.Components.Schemas[name].Value
		for p := range s.Properties {
			require.Contains(t, decoded, p, "the value of %s is not filled", name)
		}
		require.NoError(t, s.VisitJSON(decoded, openapi3.EnableJSONSchema2020()), "%s: %s", name, b)
	}
}
