package sse

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema"
)

// frame is one event encoded once for every stream it is sent to.
type frame struct {
	id           int64
	typ          string
	deploymentID *uuid.UUID
	target       string
	bytes        []byte
}

// newFrame encodes e as an SSE event: its log id, its type, and its data with
// deployment_id and created_at added.
func newFrame(e schema.Event) *frame {
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(e.Data, &fields); err != nil || fields == nil {
		// Not an object: carry it whole rather than drop it.
		fields = map[string]json.RawMessage{"data": e.Data}
	}
	f := &frame{id: e.ID, typ: e.Type, deploymentID: e.DeploymentID, target: targetOf(fields[events.KeyTarget])}
	fields[events.KeyDeploymentID] = json.RawMessage("null")
	if e.DeploymentID != nil {
		fields[events.KeyDeploymentID] = json.RawMessage(strconv.Quote(e.DeploymentID.String()))
	}
	fields[events.KeyCreatedAt] = json.RawMessage(strconv.Quote(e.CreatedAt.UTC().Format(time.RFC3339Nano)))
	data, err := json.Marshal(fields)
	if err != nil {
		// Unreachable for data read from a jsonb column; keep the event in the stream.
		data = []byte(`{}`)
	}
	var b strings.Builder
	b.Grow(len(data) + len(e.Type) + 40)
	b.WriteString("id: ")
	b.WriteString(strconv.FormatInt(e.ID, 10))
	b.WriteString("\nevent: ")
	b.WriteString(e.Type)
	b.WriteString("\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	f.bytes = []byte(b.String())
	return f
}

// targetOf is the text of a data "target" value, as data->>'target' gives it in SQL.
func targetOf(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

// filter is what a stream asked for; a zero filter matches every event.
type filter struct {
	deploymentID *uuid.UUID
	types        []string // exact types, or prefixes ending in ".*"
	targets      []string
}

func (f filter) matches(fr *frame) bool {
	if f.deploymentID != nil && (fr.deploymentID == nil || *fr.deploymentID != *f.deploymentID) {
		return false
	}
	if len(f.types) > 0 && !slices.ContainsFunc(f.types, func(t string) bool { return typeMatches(t, fr.typ) }) {
		return false
	}
	if len(f.targets) > 0 && (fr.target == "" || !slices.Contains(f.targets, fr.target)) {
		return false
	}
	return true
}

func typeMatches(pattern, typ string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(typ, prefix)
	}
	return pattern == typ
}

func (f filter) schemaFilter() schema.EventFilter {
	return schema.EventFilter{DeploymentID: f.deploymentID, Types: f.types, Targets: f.targets}
}
