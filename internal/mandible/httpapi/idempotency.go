package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

// The idempotency of POST /api/v1/deployments: a key, from the Idempotency-Key header
// or the spec's idempotency_key (both set, they must agree), names at most one
// deployment. The same key with the same spec answers 200 with that deployment; with
// another spec it is refused with 409, and nothing is started. Secret env values take
// no part in "the same": only their names do.

// withIdempotencyKey sets d's idempotency key from the request's header, answering
// 400 itself when the header and the spec disagree or the key is not storable.
func withIdempotencyKey(w http.ResponseWriter, r *http.Request, d spec.Deployment) (spec.Deployment, bool) {
	header := r.Header.Get(api.IdempotencyKeyHeader)
	if header == "" {
		return d, true
	}
	if d.IdempotencyKey != "" && d.IdempotencyKey != header {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument,
			fmt.Sprintf("the %s header %q and the spec's idempotency_key %q differ", api.IdempotencyKeyHeader, header, d.IdempotencyKey),
			api.FieldProblem{Field: api.IdempotencyKeyHeader, Problem: "must equal the spec's idempotency_key when both are set"})
		return d, false
	}
	d.IdempotencyKey = header
	if err := d.Validate(); err != nil {
		writeSpecError(w, r, err)
		return d, false
	}
	return d, true
}

// sameSpec reports whether stored, the spec of deployment id as it was stored (its
// secrets sealed for id), is d. Secret env is compared by name only and never
// opened: were the values compared, a create under another deployment's key would
// answer 200 for a right guess of its secret and 409 for a wrong one.
func sameSpec(id uuid.UUID, stored json.RawMessage, d spec.Deployment) (bool, error) {
	var was spec.Deployment
	if err := json.Unmarshal(stored, &was); err != nil {
		return false, fmt.Errorf("reading the stored spec of deployment %s: %w", id, err)
	}
	a, err := canonicalSpec(was.RedactSecrets())
	if err != nil {
		return false, err
	}
	b, err := canonicalSpec(d.RedactSecrets())
	if err != nil {
		return false, err
	}
	return bytes.Equal(a, b), nil
}

// canonicalSpec is d as JSON without the id Mandible sets, for comparison: a spec
// sent as YAML or as JSON, with its fields in any order, encodes the same.
func canonicalSpec(d spec.Deployment) ([]byte, error) {
	d.DeploymentID = ""
	b, err := json.Marshal(d.WithDefaults())
	if err != nil {
		return nil, fmt.Errorf("encoding a spec: %w", err)
	}
	return b, nil
}

// writeIdempotencyConflict answers 409 for a key that named deployment id, created
// from another spec.
func writeIdempotencyConflict(w http.ResponseWriter, r *http.Request, key string, id uuid.UUID) {
	api.WriteError(w, r, http.StatusConflict, api.CodeIdempotencyConflict,
		fmt.Sprintf("idempotency key %q already named deployment %s, created from another spec; use a new key for a new deployment", key, id),
		api.FieldProblem{Field: "idempotency_key", Problem: "already used for another spec"})
}
