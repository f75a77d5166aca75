package specschema_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/contract/spec/specschema"
)

// root is the module's root, relative to this package's directory.
const root = "../../../.."

// committedSchema is the committed api/deployment-spec.schema.json.
const committedSchema = "api/deployment-spec.schema.json"

// The committed schema is what the generator makes of today's Go types: a field added
// to internal/contract/spec without `make api-schema` fails here.
func TestCommittedSchemaIsGenerated(t *testing.T) {
	t.Chdir(root)
	want, err := specschema.Generate()
	require.NoError(t, err)
	got, err := os.ReadFile(committedSchema)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "%s is stale: run make api-schema", committedSchema)
}

// compiled is the committed schema, compiled.
func compiled(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, committedSchema))
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource(specschema.ID, doc))
	s, err := c.Compile(specschema.ID)
	require.NoError(t, err)
	return s
}

// instanceOf is a YAML or JSON spec as the JSON value the schema validates.
func instanceOf(t *testing.T, specText []byte) any {
	t.Helper()
	js, err := yaml.YAMLToJSON(specText)
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	require.NoError(t, err)
	return v
}

// Every example spec shipped in deploy/examples is valid by the schema, and by
// spec.Parse.
func TestExamplesAreValid(t *testing.T) {
	t.Parallel()
	s := compiled(t)
	examples, err := filepath.Glob(filepath.Join(root, "deploy/examples/*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, examples)
	for _, path := range examples {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, s.Validate(instanceOf(t, b)), path)
		_, err = spec.Parse(b)
		require.NoError(t, err, path)
	}
}

// The schema refuses what spec.Parse refuses for the reasons it can see, and accepts
// what spec.Parse accepts: it is never stricter than the server.
func TestSchemaAgreesWithParse(t *testing.T) {
	t.Parallel()
	s := compiled(t)
	valid := []string{
		`{"name":"a","targets":["t-1"],"steps":[{"name":"s","command":"true"}]}`,
		`{"name":"a.b_c-1","target_selector":{"role":"web"},"steps":[{"name":"s","command":"x","timeout":"1h30m","env":{"_A1":"v"}}]}`,
		`{"name":"a","targets":["t"],"priority":"low","max_parallel":0,"idempotency_key":"","steps":[{"name":"s","command":"x","timeout":".5s"}]}`,
		`{"name":"a","targets":["t"],"steps":[{"name":"s","command":"x","timeout":"1.5h","working_dir":"/srv","continue_on_error":true}]}`,
	}
	invalid := map[string]string{
		"unknown field":           `{"name":"a","targets":["t"],"steps":[{"name":"s","command":"x"}],"bogus":1}`,
		"unknown step field":      `{"name":"a","targets":["t"],"steps":[{"name":"s","command":"x","cmd":"y"}]}`,
		"no name":                 `{"targets":["t"],"steps":[{"name":"s","command":"x"}]}`,
		"bad name":                `{"name":"-a","targets":["t"],"steps":[{"name":"s","command":"x"}]}`,
		"bad priority":            `{"name":"a","priority":"asap","targets":["t"],"steps":[{"name":"s","command":"x"}]}`,
		"no targets":              `{"name":"a","steps":[{"name":"s","command":"x"}]}`,
		"empty targets":           `{"name":"a","targets":[],"target_selector":{},"steps":[{"name":"s","command":"x"}]}`,
		"no steps":                `{"name":"a","targets":["t"],"steps":[]}`,
		"blank command":           `{"name":"a","targets":["t"],"steps":[{"name":"s","command":"  "}]}`,
		"bad timeout":             `{"name":"a","targets":["t"],"steps":[{"name":"s","command":"x","timeout":"soon"}]}`,
		"bad env key":             `{"name":"a","targets":["t"],"steps":[{"name":"s","command":"x","env":{"1A":"v"}}]}`,
		"relative working_dir":    `{"name":"a","targets":["t"],"steps":[{"name":"s","command":"x","working_dir":"srv"}]}`,
		"negative max_parallel":   `{"name":"a","targets":["t"],"max_parallel":-1,"steps":[{"name":"s","command":"x"}]}`,
		"steps of the wrong type": `{"name":"a","targets":["t"],"steps":"x"}`,
	}
	for _, v := range valid {
		require.NoError(t, s.Validate(instanceOf(t, []byte(v))), v)
		_, err := spec.Parse([]byte(v))
		require.NoError(t, err, v)
	}
	for why, v := range invalid {
		require.Error(t, s.Validate(instanceOf(t, []byte(v))), why)
		_, err := spec.Parse([]byte(v))
		require.Error(t, err, why)
	}
}

// The schema names every field of spec.Deployment and spec.Step by its JSON name.
func TestSchemaNamesEveryField(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(root, committedSchema))
	require.NoError(t, err)
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	full, err := json.Marshal(spec.Deployment{Name: "n", Priority: "p", Targets: []string{"t"}, TargetSelector: map[string]string{"k": "v"},
		Steps: []spec.Step{{Name: "s"}}, MaxParallel: 1, IdempotencyKey: "k", DeploymentID: "d",
		Rollout: &spec.Rollout{}, OnFailure: []spec.Step{{Name: "r"}}})
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(full, &fields))
	for name := range fields {
		require.Contains(t, doc.Properties, name)
	}
	require.Len(t, doc.Properties, len(fields))
}
