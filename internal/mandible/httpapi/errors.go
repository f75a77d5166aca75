package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/api/serviceerror"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// writeInputError answers 400 with one field entry per problem of err.
func writeInputError(w http.ResponseWriter, r *http.Request, err *domain.InputError) {
	api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, err.Error(), fieldProblemsOf(err.Problems)...)
}

// writeServerError logs err and answers without leaking it: 503 with Retry-After
// when a server Mandible depends on did not answer in time or is overloaded (the
// request may succeed if sent again), 500 otherwise.
func writeServerError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	if which, ok := unavailableDependency(err); ok {
		w.Header().Set("Retry-After", retryAfterSeconds)
		api.WriteError(w, r, http.StatusServiceUnavailable, api.CodeUnavailable,
			which+" did not answer in time or is overloaded; try again")
		return
	}
	api.WriteError(w, r, http.StatusInternalServerError, api.CodeInternal, "internal error; see the server log")
}

// writeLookupError answers a failed read or change of one named item: 404 with
// notFound when err is schema.ErrNotFound, writeServerError's answer for another
// error. It reports whether it answered, that is whether err was not nil.
func writeLookupError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error, notFound string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, schema.ErrNotFound):
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, notFound)
	default:
		writeServerError(w, r, logger, err)
	}
	return true
}

// retryAfterSeconds is the Retry-After of a 503 for an unavailable dependency.
const retryAfterSeconds = "1"

// unavailableDependency names the server behind a transient err: Temporal for
// gRPC's Unavailable, ResourceExhausted and DeadlineExceeded, PostgreSQL for a
// failed connection or a statement timeout, and "a server Mandible depends on" for
// a deadline that expired in Mandible itself.
func unavailableDependency(err error) (string, bool) {
	var (
		unavailable *serviceerror.Unavailable
		exhausted   *serviceerror.ResourceExhausted
		deadline    *serviceerror.DeadlineExceeded
		connect     *pgconn.ConnectError
	)
	switch {
	case errors.As(err, &unavailable), errors.As(err, &exhausted), errors.As(err, &deadline):
		return "Temporal", true
	case errors.As(err, &connect), pgconn.Timeout(err):
		return "PostgreSQL", true
	case errors.Is(err, context.DeadlineExceeded):
		return "a server Mandible depends on", true
	}
	return "", false
}

// decodeJSON reads one JSON value of at most limit bytes into v, refusing unknown
// fields. It answers the error itself and returns false when the body is bad.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var (
			tooBig    *http.MaxBytesError
			syntax    *json.SyntaxError
			typeError *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &tooBig):
			api.WriteError(w, r, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("request body exceeds %d bytes", limit))
		case errors.As(err, &syntax):
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidJSON, fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, err))
		case errors.As(err, &typeError):
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, err.Error(),
				api.FieldProblem{Field: typeError.Field, Problem: fmt.Sprintf("must be %s, got %s", typeError.Type, typeError.Value)})
		case errors.Is(err, io.EOF):
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidJSON, "request body is empty")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, err.Error(), api.FieldProblem{Field: field, Problem: "unknown field"})
		default:
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidJSON, err.Error())
		}
		return false
	}
	if dec.More() {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidJSON, "request body holds more than one JSON value")
		return false
	}
	return true
}
