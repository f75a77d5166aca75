// Package specschema generates the JSON Schema of a deployment spec from the Go types
// of internal/contract/spec, the one source of its fields: api/deployment-spec.schema.json is
// its output (`make api-schema`), and a test fails when the committed file differs.
//
// Reflection gives the fields, their types, which are required and their comments;
// Generate adds the bounds that internal/contract/spec enforces in code (Validate), from its
// exported constants where it has them. spec.Parse stays the authority: the schema
// lets an editor or a client catch most mistakes before they submit.
package specschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// ID is the schema's $id: the URL Mandible serves it at, under any host.
const ID = "https://mantis.dev/schemas/deployment-spec.json"

// SpecDir is internal/contract/spec's directory relative to the module's root; Generate reads
// the field comments there, so it runs from the root.
const SpecDir = "internal/contract/spec"

// modulePath is the import path of the module's root.
const modulePath = "github.com/mantis-deploy/mantis"

// Patterns that internal/contract/spec checks with unexported expressions (its namePattern
// and envKeyPattern); TestSchemaAgreesWithParse holds them to spec.Parse.
const (
	NamePattern   = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`
	EnvKeyPattern = `^[A-Za-z_][A-Za-z0-9_]*$`
	// DurationPattern is a Go duration (time.ParseDuration), as a step's timeout
	// takes it; Validate also wants it positive and at most spec.MaxStepTimeout.
	DurationPattern = `^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`
	// maxIdempotencyKey is the longest idempotency_key spec.Validate stores.
	maxIdempotencyKey = 200
)

// Generate returns the JSON Schema (draft 2020-12) of spec.Deployment, indented and
// ending in a newline. It must run from the module's root (see SpecDir).
func Generate() ([]byte, error) {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Mapper: mapType}
	if err := r.AddGoComments(modulePath, SpecDir); err != nil {
		return nil, fmt.Errorf("reading the comments of %s: %w", SpecDir, err)
	}
	s := r.ReflectFromType(reflect.TypeFor[spec.Deployment]())
	s.ID = ID
	s.Title = "Mantis deployment spec"
	s.Description = "A deployment: ordered steps of commands run on targets. Submitted as JSON or YAML to POST /api/v1/deployments."
	if err := bound(s); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encoding the deployment spec schema: %w", err)
	}
	return out.Bytes(), nil
}

// bound adds to the reflected schema d the checks spec.Validate makes in code.
func bound(d *jsonschema.Schema) error {
	props := map[string]*jsonschema.Schema{}
	for _, name := range []string{"name", "priority", "targets", "target_selector", "steps", "max_parallel", "idempotency_key", "deployment_id"} {
		p, ok := d.Properties.Get(name)
		if !ok {
			return fmt.Errorf("spec.Deployment has no field %q: update specschema", name)
		}
		props[name] = p
	}
	props["name"].Pattern = NamePattern
	props["priority"].Enum = enumOf(domain.Priorities)
	props["priority"].Default = spec.DefaultPriority
	props["targets"].Items.Pattern = NamePattern
	props["targets"].MaxItems = ptr(spec.MaxTargets)
	props["targets"].UniqueItems = true
	props["target_selector"].PropertyNames = &jsonschema.Schema{MinLength: ptr(1)}
	props["steps"].MinItems = ptr(1)
	props["steps"].MaxItems = ptr(spec.MaxSteps)
	props["max_parallel"].Minimum = "0"
	props["idempotency_key"].MaxLength = ptr(maxIdempotencyKey)
	props["deployment_id"].ReadOnly = true
	// Either named targets or a selector, or both.
	d.AnyOf = []*jsonschema.Schema{
		minOne("targets", "array"),
		minOne("target_selector", "object"),
	}
	return boundStep(props["steps"].Items)
}

// boundStep adds the checks of spec.Step's validate to the reflected step schema.
func boundStep(st *jsonschema.Schema) error {
	props := map[string]*jsonschema.Schema{}
	for _, name := range []string{"name", "command", "timeout", "env", "env_secret", "working_dir"} {
		p, ok := st.Properties.Get(name)
		if !ok {
			return fmt.Errorf("spec.Step has no field %q: update specschema", name)
		}
		props[name] = p
	}
	props["name"].Pattern = NamePattern
	props["command"].Pattern = `\S`
	props["timeout"].Pattern = DurationPattern
	props["timeout"].Default = spec.DefaultStepTimeout.String()
	props["env"].PropertyNames = &jsonschema.Schema{Pattern: EnvKeyPattern}
	props["env"].MaxProperties = ptr(spec.MaxEnvVars)
	props["env_secret"].PropertyNames = &jsonschema.Schema{Pattern: EnvKeyPattern}
	props["working_dir"].Pattern = "^/"
	return nil
}

// BatchSizePattern is a rollout batch size written as a string: a whole number or a
// percent ("10%"); spec.ParseBatchSize reads it.
const BatchSizePattern = `^\s*([0-9]+|[0-9]*\.?[0-9]+\s*%)\s*$`

// mapType gives the schema of the spec types whose JSON is not their Go shape: a
// rollout batch size is a number or a string such as "10%".
func mapType(t reflect.Type) *jsonschema.Schema {
	if t != reflect.TypeFor[spec.BatchSize]() {
		return nil
	}
	return &jsonschema.Schema{
		Description: `A batch size: a number of targets (5) or a percent of them ("10%").`,
		OneOf: []*jsonschema.Schema{
			{Type: "integer", Minimum: "1", Maximum: json.Number(fmt.Sprint(spec.MaxTargets))},
			{Type: "string", Pattern: BatchSizePattern},
		},
	}
}

// minOne is the schema asking that property name, of type typ, be non-empty.
func minOne(name, typ string) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: typ}
	if typ == "array" {
		s.MinItems = ptr(1)
	} else {
		s.MinProperties = ptr(1)
	}
	props := jsonschema.NewProperties()
	props.Set(name, s)
	return &jsonschema.Schema{Required: []string{name}, Properties: props}
}

func enumOf(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}

func ptr(n int) *uint64 {
	u := uint64(n)
	return &u
}
