package httpapi

import (
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/schema"
)

// The API's types are its own (package api). Deployments and dispatch requests are
// read straight into them (schema's views are those types); these turn the other
// schema rows into them, so that a change to a stored row does not change the JSON
// on the wire.

// enqueueAnswerOf is the answer to an enqueue that stored out.
func enqueueAnswerOf(out []schema.EnqueuedRequest) api.EnqueueAnswer {
	a := api.EnqueueAnswer{Requests: make([]api.EnqueuedRequest, len(out))}
	for i, o := range out {
		a.Requests[i] = api.EnqueuedRequest{ID: o.ID, IdempotencyKey: o.IdempotencyKey, Created: o.Created, ExpiresAt: o.ExpiresAt}
	}
	return a
}

// nonNil is items, or an empty list for none, so that a list answers [] and never
// null.
func nonNil[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}
