package api

// The paths of the API's own description; neither needs a token.
const (
	// OpenAPIPath serves the OpenAPI document (api/openapi.yaml).
	OpenAPIPath = "/api/v1/openapi.yaml"
	// DeploymentSpecSchemaPath serves the JSON Schema of a deployment spec
	// (api/deployment-spec.schema.json).
	DeploymentSpecSchemaPath = "/api/v1/schemas/deployment-spec.json"
)

// Media types of the API's documents and bodies.
const (
	// OpenAPIContentType is the media type of the OpenAPI document.
	OpenAPIContentType = "application/yaml"
	// SchemaContentType is the media type of a JSON Schema.
	SchemaContentType = "application/schema+json"
)

// IdempotencyKeyHeader is the request header that makes POST /api/v1/deployments
// idempotent, as the spec's idempotency_key does; when both are set they must agree.
const IdempotencyKeyHeader = "Idempotency-Key"
