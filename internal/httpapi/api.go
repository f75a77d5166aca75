package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mantis-deploy/mantis/schema"
)

// FieldProblem names one bad field of a request.
type FieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// ErrorBody is every error response: a code, a message, and the fields at fault.
type ErrorBody struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Fields  []FieldProblem `json:"fields,omitempty"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, message string, fields ...FieldProblem) {
	var body ErrorBody
	body.Error.Code, body.Error.Message, body.Error.Fields = code, message, fields
	writeJSON(w, status, body)
}

// writeInputError answers 400 with one field entry per problem of err.
func writeInputError(w http.ResponseWriter, err *schema.InputError) {
	fields := make([]FieldProblem, 0, len(err.Problems))
	for _, p := range err.Problems {
		field, problem, ok := strings.Cut(p, ": ")
		if !ok {
			field, problem = "", p
		}
		fields = append(fields, FieldProblem{Field: field, Problem: problem})
	}
	writeError(w, http.StatusBadRequest, "invalid_argument", err.Error(), fields...)
}

// writeServerError logs err and answers 500 without leaking it.
func writeServerError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal", "internal error; see the server log")
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
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body exceeds %d bytes", limit))
		case errors.As(err, &syntax):
			writeError(w, http.StatusBadRequest, "invalid_json", fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, err))
		case errors.As(err, &typeError):
			writeError(w, http.StatusBadRequest, "invalid_argument", err.Error(),
				FieldProblem{Field: typeError.Field, Problem: fmt.Sprintf("must be %s, got %s", typeError.Type, typeError.Value)})
		case errors.Is(err, io.EOF):
			writeError(w, http.StatusBadRequest, "invalid_json", "request body is empty")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			writeError(w, http.StatusBadRequest, "invalid_argument", err.Error(), FieldProblem{Field: field, Problem: "unknown field"})
		default:
			writeError(w, http.StatusBadRequest, "invalid_json", err.Error())
		}
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid_json", "request body holds more than one JSON value")
		return false
	}
	return true
}
