// Package api is the contract of Mandible's HTTP API: the request and response body
// of every route under /api/v1, the error body every route and the event streams
// answer with, and the names of the links a deployment carries. The server
// (internal/mandible/httpapi, internal/mandible/sse) and the client (internal/apiclient, mantisctl)
// both use these types, so the JSON on the wire is written in one place. The
// machine-readable description of the same contract is api/openapi.yaml at the
// repository's root, served at OpenAPIPath; tests hold the two together.
//
// The package imports nothing from the project but internal/domain, whose states
// and names it shares with the server.
package api

import (
	"encoding/json"
	"net/http"
)

// ErrorCode is the machine-readable code of an error answer: the problem's code
// member, and the last segment of its type URI.
type ErrorCode string

// The codes of error answers.
const (
	CodeInvalidArgument ErrorCode = "invalid_argument"
	CodeInvalidJSON     ErrorCode = "invalid_json"
	CodeInvalidBody     ErrorCode = "invalid_body"
	CodeInvalidSpec     ErrorCode = "invalid_spec"
	CodeTooLarge        ErrorCode = "too_large"
	CodeNotFound        ErrorCode = "not_found"
	CodeAlreadyFinished ErrorCode = "already_finished"
	// CodeUnauthenticated answers 401: no bearer token, or one the keyring does not hold.
	CodeUnauthenticated ErrorCode = "unauthenticated"
	// CodeForbidden answers 403: a known token whose scope does not cover the call.
	CodeForbidden ErrorCode = "forbidden"
	// CodeMethodNotAllowed answers 405 for a known path asked with another method;
	// the Allow header lists the methods it takes.
	CodeMethodNotAllowed ErrorCode = "method_not_allowed"
	// CodeIdempotencyConflict answers 409 for an Idempotency-Key that already named a
	// deployment created from another spec.
	CodeIdempotencyConflict ErrorCode = "idempotency_conflict"
	// CodeFrozen answers 409 for a deployment an active freeze window covers.
	CodeFrozen ErrorCode = "frozen"
	// CodeNotWaiting answers 409 for a decision the deployment does not wait for now.
	CodeNotWaiting ErrorCode = "not_waiting"
	// CodeInvalidState answers 409 for a call the deployment's status does not allow
	// (a resume of a deployment that did not fail, a re-run of one still running).
	CodeInvalidState ErrorCode = "invalid_state"
	// CodeAlreadyExists answers 409 for a create whose name is taken.
	CodeAlreadyExists ErrorCode = "already_exists"
	// CodeRateLimited answers 429, with Retry-After, for a credential presented from
	// an address that failed too many lately.
	CodeRateLimited ErrorCode = "rate_limited"
	// CodeTooManyStreams answers 429 for an event stream past the caller's or the
	// replica's cap of open streams.
	CodeTooManyStreams ErrorCode = "too_many_streams"
	CodeUnavailable    ErrorCode = "unavailable"
	CodeBrokerError    ErrorCode = "broker_error"
	CodeInternal       ErrorCode = "internal"
)

// ErrorCodes lists every code, in the order of the constants.
var ErrorCodes = []ErrorCode{
	CodeInvalidArgument, CodeInvalidJSON, CodeInvalidBody, CodeInvalidSpec, CodeTooLarge, CodeNotFound,
	CodeAlreadyFinished, CodeUnauthenticated, CodeForbidden, CodeMethodNotAllowed, CodeIdempotencyConflict,
	CodeFrozen, CodeNotWaiting, CodeInvalidState, CodeAlreadyExists, CodeRateLimited, CodeTooManyStreams, CodeUnavailable,
	CodeBrokerError, CodeInternal,
}

// ProblemContentType is the media type of every error answer (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemTypeBase prefixes a code to make a problem's type URI.
const ProblemTypeBase = "https://mantis.dev/problems/"

// titles are the fixed, human-readable summaries of each code: a problem's title.
var titles = map[ErrorCode]string{
	CodeInvalidArgument:     "Invalid argument",
	CodeInvalidJSON:         "Malformed JSON",
	CodeInvalidBody:         "Unreadable request body",
	CodeInvalidSpec:         "Invalid deployment spec",
	CodeTooLarge:            "Request body too large",
	CodeNotFound:            "Not found",
	CodeAlreadyFinished:     "Already finished",
	CodeNotWaiting:          "Not waiting for that decision",
	CodeInvalidState:        "Not allowed in the deployment's status",
	CodeUnauthenticated:     "Unauthenticated",
	CodeForbidden:           "Forbidden",
	CodeMethodNotAllowed:    "Method not allowed",
	CodeIdempotencyConflict: "Idempotency key reused with another request",
	CodeFrozen:              "Refused by a freeze window",
	CodeAlreadyExists:       "Already exists",
	CodeRateLimited:         "Too many failed credentials",
	CodeTooManyStreams:      "Too many event streams",
	CodeUnavailable:         "Unavailable",
	CodeBrokerError:         "Broker error",
	CodeInternal:            "Internal error",
}

// Type is the problem type URI of c.
func (c ErrorCode) Type() string { return ProblemTypeBase + string(c) }

// Title is the fixed summary of c.
func (c ErrorCode) Title() string {
	if t, ok := titles[c]; ok {
		return t
	}
	return string(c)
}

// FieldProblem names one bad field (or query parameter) of a request.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// Problem is every error answer, an RFC 9457 problem detail: the standard members
// type, title, status, detail and instance (the request's path), and the extension
// members code (an ErrorCode) and fields (the request's fields at fault).
type Problem struct {
	Type     string         `json:"type"`
	Title    string         `json:"title"`
	Status   int            `json:"status"`
	Detail   string         `json:"detail"`
	Instance string         `json:"instance"`
	Code     ErrorCode      `json:"code"`
	Fields   []FieldProblem `json:"fields,omitempty"`
	// Error repeats code, detail (as message) and fields in the shape error
	// answers had before they were problem details, for clients that read it.
	//
	// Older clients read it; new ones read Code, Detail and Fields.
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the content of the deprecated error member of a Problem.
type ErrorDetail struct {
	Code    ErrorCode      `json:"code"`
	Message string         `json:"message"`
	Fields  []FieldProblem `json:"fields,omitempty"`
}

// ErrorBody is the shape of error answers before they were problem details; a
// Problem still decodes into it.
//
// Older clients decode it; new ones decode a Problem.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// NewProblem is the problem of a request to path answered with status and code.
func NewProblem(status int, code ErrorCode, path, detail string, fields ...FieldProblem) Problem {
	return Problem{
		Type: code.Type(), Title: code.Title(), Status: status, Detail: detail, Instance: path,
		Code: code, Fields: fields, Error: ErrorDetail{Code: code, Message: detail, Fields: fields},
	}
}

// WriteError answers r with status and a Problem of code, as application/problem+json.
// Every error answer of the API and the event streams is written here.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code ErrorCode, detail string, fields ...FieldProblem) {
	path := ""
	if r != nil {
		path = r.URL.Path
	}
	writeBody(w, status, ProblemContentType, NewProblem(status, code, path, detail, fields...))
}

// WriteJSON answers status with v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, "application/json", v)
}

func writeBody(w http.ResponseWriter, status int, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
