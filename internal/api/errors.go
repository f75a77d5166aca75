// Package api is the contract of Mandible's HTTP API: the request and response body
// of every route under /api/v1, the error body every route and the event streams
// answer with, and the names of the links a deployment carries. The server
// (internal/httpapi, internal/sse) and the client (internal/apiclient, mantisctl)
// both use these types, so the JSON on the wire is written in one place.
//
// The package imports nothing from the project.
package api

import (
	"encoding/json"
	"net/http"
)

// ErrorCode is the machine-readable code of an error answer.
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
	CodeForbidden        ErrorCode = "forbidden"
	CodeMethodNotAllowed ErrorCode = "method_not_allowed"
	CodeUnavailable      ErrorCode = "unavailable"
	CodeBrokerError      ErrorCode = "broker_error"
	CodeInternal         ErrorCode = "internal"
)

// FieldProblem names one bad field (or query parameter) of a request.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// ErrorDetail is the content of an error answer.
type ErrorDetail struct {
	Code    ErrorCode      `json:"code"`
	Message string         `json:"message"`
	Fields  []FieldProblem `json:"fields,omitempty"`
}

// ErrorBody is every error answer: a code, a message, and the fields at fault.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// WriteError answers status with an ErrorBody.
func WriteError(w http.ResponseWriter, status int, code ErrorCode, message string, fields ...FieldProblem) {
	WriteJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: message, Fields: fields}})
}

// WriteJSON answers status with v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
