package httpapi_test

import (
	"encoding"
	"encoding/json"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"
)

// apiName is the one style of every property and query parameter of the API.
var apiName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// nameWalk collects the property names a schema allows, through references,
// properties, items, additional properties and combinations, each schema once.
type nameWalk struct {
	seen map[*openapi3.Schema]bool
	bad  []string
}

func (w *nameWalk) schema(at string, ref *openapi3.SchemaRef) {
	if ref == nil || ref.Value == nil || w.seen[ref.Value] {
		return
	}
	if ref.Ref != "" {
		at = ref.Ref
	}
	s := ref.Value
	w.seen[s] = true
	for name, p := range s.Properties {
		if !apiName.MatchString(name) {
			w.bad = append(w.bad, at+"."+name)
		}
		w.schema(at+"."+name, p)
	}
	w.schema(at+"[]", s.Items)
	w.schema(at+"{}", s.AdditionalProperties.Schema)
	w.schema(at+"!", s.Not)
	for _, group := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for _, sub := range group {
			w.schema(at, sub)
		}
	}
}

// Every property of every request and answer schema of the document, the
// deployment spec's included, and every query and path parameter, is snake_case:
// the API speaks one style.
func TestDocumentNamesAreSnakeCase(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	w := &nameWalk{seen: map[*openapi3.Schema]bool{}}
	for key, op := range operations(doc) {
		for _, p := range op.Parameters {
			if in := p.Value.In; (in == openapi3.ParameterInQuery || in == openapi3.ParameterInPath) && !apiName.MatchString(p.Value.Name) {
				w.bad = append(w.bad, key+" parameter "+p.Value.Name)
			}
		}
		if op.RequestBody != nil {
			for ct, media := range op.RequestBody.Value.Content {
				w.schema(key+" request "+ct, media.Schema)
			}
		}
		for status, resp := range op.Responses.Map() {
			for ct, media := range resp.Value.Content {
				w.schema(key+" "+status+" "+ct, media.Schema)
			}
		}
	}
	for name, s := range doc.Components.Schemas {
		w.schema("#/components/schemas/"+name, s)
	}
	require.Greater(t, len(w.seen), 50, "the walk reached the schemas")
	require.Empty(t, w.bad, "property names outside %s", apiName)
}

// goNames collects the JSON names a Go type writes, through pointers, slices,
// arrays, maps and embedded structs; a type with its own JSON encoding is a leaf.
func goNames(t reflect.Type, at string, seen map[reflect.Type]bool, bad *[]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Marshaler]()) ||
		reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
		return
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" {
			goNames(f.Type, at, seen, bad)
			continue
		}
		if name == "" {
			name = f.Name
		}
		if !apiName.MatchString(name) {
			*bad = append(*bad, at+"."+f.Name+" as "+name)
		}
		goNames(f.Type, at+"."+f.Name, seen, bad)
	}
}

// The Go types of the API's requests and answers write only snake_case names, to
// the bottom of what they hold.
func TestGoTypesWriteSnakeCase(t *testing.T) {
	t.Parallel()
	var bad []string
	seen := map[reflect.Type]bool{}
	for name, typ := range schemaTypes {
		goNames(typ, name, seen, &bad)
	}
	require.Empty(t, bad, "JSON names outside %s", apiName)
}

// Every field of every struct of internal/contract/api, the source of the
// document's schemas, names its JSON member in snake_case (or leaves it out),
// whether or not a schema describes it yet.
func TestContractTagsAreSnakeCase(t *testing.T) {
	t.Parallel()
	const dir = "../../contract/api"
	fset := gotoken.NewFileSet()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
	}
	require.NotEmpty(t, files)
	var bad []string
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			for _, f := range st.Fields.List {
				tag := ""
				if f.Tag != nil {
					tag = reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
				}
				name, _, _ := strings.Cut(tag, ",")
				exported := len(f.Names) == 0 || f.Names[0].IsExported()
				if exported && name != "-" && !apiName.MatchString(name) {
					bad = append(bad, fset.Position(f.Pos()).String()+" json:"+tag)
				}
			}
			return true
		})
	}
	require.Empty(t, bad, "fields whose JSON name is not snake_case (or not set)")
}
