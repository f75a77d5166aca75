package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// httpMethods orders the operations of a path.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// loadOpenAPI reads api/openapi.yaml, the deployment spec's schema it refers to
// read from api/ as well.
func loadOpenAPI(root string) (*openapi3.T, error) {
	data, err := os.ReadFile(filepath.Join(root, "api", "openapi.yaml"))
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		return os.ReadFile(filepath.Join(root, "api", "deployment-spec.schema.json"))
	}
	doc, err := loader.LoadFromDataWithPath(data, &url.URL{Path: "/api/v1/openapi.yaml"})
	if err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	return doc, nil
}

// httpAPIPage is the reference of every operation of api/openapi.yaml, by tag.
func httpAPIPage(root string) (string, error) {
	doc, err := loadOpenAPI(root)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(generatedMarkdown)
	fmt.Fprintf(&b, "# HTTP API reference\n\n%s\n\n", escapeHTML(doc.Info.Summary))
	fmt.Fprintf(&b, "Generated from [`api/openapi.yaml`](../../api/openapi.yaml) (OpenAPI %s), which Mandible also "+
		"serves at `/api/v1/openapi.yaml`.\n\n%s\n", doc.OpenAPI, escapeHTML(strings.TrimSpace(doc.Info.Description)))
	if s := doc.Components.SecuritySchemes["bearerAuth"]; s != nil && s.Value != nil {
		fmt.Fprintf(&b, "\n## Authentication\n\n%s\n", escapeHTML(strings.TrimSpace(s.Value.Description)))
	}
	paths := doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for p := range paths {
		keys = append(keys, p)
	}
	slices.Sort(keys)
	written := 0
	for _, tag := range tagOrder(doc, paths) {
		fmt.Fprintf(&b, "\n## %s\n", tag)
		for _, p := range keys {
			item := paths[p]
			for _, method := range httpMethods {
				op := item.GetOperation(method)
				if op == nil || !slices.Contains(op.Tags, tag) || op.Tags[0] != tag {
					continue
				}
				writeOperation(&b, doc, method, p, item, op)
				written++
			}
		}
	}
	if all := countOperations(paths); written != all {
		return "", fmt.Errorf("api/openapi.yaml: %d operations, %d of them with a tag", all, written)
	}
	return b.String(), nil
}

func writeOperation(b *strings.Builder, doc *openapi3.T, method, path string, item *openapi3.PathItem, op *openapi3.Operation) {
	fmt.Fprintf(b, "\n### `%s %s`\n\n%s\n\n", method, path, escapeHTML(strings.TrimSpace(op.Summary)))
	if d := strings.TrimSpace(op.Description); d != "" {
		fmt.Fprintf(b, "%s\n\n", escapeHTML(d))
	}
	fmt.Fprintf(b, "Operation `%s`. Scope: %s.\n\n", op.OperationID, scopeOf(doc, op))
	params := append(append(openapi3.Parameters{}, item.Parameters...), op.Parameters...)
	if len(params) > 0 {
		b.WriteString("| parameter | in | type | required | description |\n|---|---|---|---|---|\n")
		for _, ref := range params {
			p := ref.Value
			fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", p.Name, p.In, schemaText(p.Schema), yesNo(p.Required), cell(oneLine(p.Description)))
		}
		b.WriteString("\n")
	}
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		fmt.Fprintf(b, "Request body%s: %s.", map[bool]string{true: " (required)", false: ""}[rb.Value.Required], contentText(rb.Value.Content))
		if d := oneLine(rb.Value.Description); d != "" {
			fmt.Fprintf(b, " %s", escapeHTML(d))
		}
		b.WriteString("\n\n")
	}
	b.WriteString("| status | description | body |\n|---|---|---|\n")
	responses := op.Responses.Map()
	codes := make([]string, 0, len(responses))
	for code := range responses {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	for _, code := range codes {
		r := responses[code].Value
		desc := ""
		if r.Description != nil {
			desc = oneLine(*r.Description)
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", code, cell(desc), contentText(r.Content))
	}
}

// scopeOf is the token scope an operation needs: its security requirement, or the
// document's.
func scopeOf(doc *openapi3.T, op *openapi3.Operation) string {
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	var scopes []string
	for _, req := range reqs {
		for _, s := range req["bearerAuth"] {
			scopes = append(scopes, "`"+s+"`")
		}
	}
	if len(scopes) == 0 {
		return "none (no token needed)"
	}
	return strings.Join(scopes, ", ")
}

// contentText names the media types of a body and their schemas.
func contentText(c openapi3.Content) string {
	if len(c) == 0 {
		return "–"
	}
	types := make([]string, 0, len(c))
	for t := range c {
		types = append(types, t)
	}
	slices.Sort(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = "`" + t + "`"
		if s := schemaText(c[t].Schema); s != "" {
			parts[i] += " " + s
		}
	}
	return strings.Join(parts, ", ")
}

// schemaText names a schema: its component's name, or its type.
func schemaText(s *openapi3.SchemaRef) string {
	if s == nil {
		return ""
	}
	if s.Ref != "" {
		name := s.Ref[strings.LastIndex(s.Ref, "/")+1:]
		return strings.TrimSuffix(name, ".json")
	}
	if s.Value == nil || s.Value.Type == nil {
		return ""
	}
	t := strings.Join(s.Value.Type.Slice(), " or ")
	if t == "array" && s.Value.Items != nil {
		if item := schemaText(s.Value.Items); item != "" {
			t = "array of " + item
		}
	}
	if len(s.Value.Enum) > 0 {
		vals := make([]string, len(s.Value.Enum))
		for i, v := range s.Value.Enum {
			vals[i] = fmt.Sprint(v)
		}
		t += " (" + strings.Join(vals, ", ") + ")"
	}
	return t
}

func oneLine(s string) string { return strings.TrimSpace(spaces.ReplaceAllString(s, " ")) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func countOperations(paths map[string]*openapi3.PathItem) int {
	n := 0
	for _, item := range paths {
		n += len(item.Operations())
	}
	return n
}

// tagOrder is the document's tags, in its order, then those only operations name,
// sorted: each operation is listed under its first tag.
func tagOrder(doc *openapi3.T, paths map[string]*openapi3.PathItem) []string {
	var out []string
	for _, t := range doc.Tags {
		out = append(out, t.Name)
	}
	var extra []string
	for _, item := range paths {
		for _, op := range item.Operations() {
			if len(op.Tags) > 0 && !slices.Contains(out, op.Tags[0]) && !slices.Contains(extra, op.Tags[0]) {
				extra = append(extra, op.Tags[0])
			}
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}
