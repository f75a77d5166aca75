// Package apidoc holds the machine-readable contract of Mandible's HTTP API, embedded
// so that Mandible serves the very files committed here: openapi.yaml (the OpenAPI
// document of every route, at /api/v1/openapi.yaml) and
// deployment-spec.schema.json (the JSON Schema of a deployment spec, generated from
// internal/contract/spec's types by `make api-schema`, at /api/v1/schemas/deployment-spec.json).
// The Go types of the bodies are internal/contract/api's; tests hold the document to them and
// to the routes.
package apidoc

import _ "embed"

// OpenAPI is api/openapi.yaml, the OpenAPI 3.1 document of the HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte

// DeploymentSpecSchema is api/deployment-spec.schema.json, the JSON Schema of a
// deployment spec.
//
//go:embed deployment-spec.schema.json
var DeploymentSpecSchema []byte
