// Package domain holds the states and values that Mandible's workflows, its
// activities, its store and its API share: the state names of each table
// (status.go, checked against the migrations' CHECK lists), the dispatch budget and
// lifetime, priorities, a claimed request and what became of its delivery
// (dispatch.go), where a step stands (step.go), the decisions a person takes and
// their record (decisions.go), the scopes of a concurrency limit (limits.go), and
// the error that refuses a request by field (input.go).
//
// It imports only the standard library and uuid, so that the workflow code, which
// must not reach the database or the network, can use these types without linking
// pgx (its TestDeps holds this). The store reads
// and writes them; the HTTP layer maps them to the API's types.
package domain
