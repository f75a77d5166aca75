package domain

import (
	"fmt"
	"strings"
)

// FieldProblem names one bad field of a request (or query parameter) and what is
// wrong with it. Field is "" for a problem of the request as a whole.
type FieldProblem struct {
	Field   string
	Problem string
}

// String is the problem as messages print it: "field: problem", or the problem alone
// when it names no field.
func (p FieldProblem) String() string {
	if p.Field == "" {
		return p.Problem
	}
	return p.Field + ": " + p.Problem
}

// Problems collects every problem of a request, so that one answer lists them all.
type Problems []FieldProblem

// Add records that field has problem.
func (ps *Problems) Add(field, problem string) {
	*ps = append(*ps, FieldProblem{Field: field, Problem: problem})
}

// Addf records that field has the problem format and args print.
func (ps *Problems) Addf(field, format string, args ...any) {
	ps.Add(field, fmt.Sprintf(format, args...))
}

// String joins the problems as messages print them: "a: x; b: y".
func (ps Problems) String() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

// Err is an *InputError listing ps, or nil when there are none.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return &InputError{Problems: ps}
}

// InputError refuses a request for what it holds, listing every problem by field:
// sending it again as it is fails the same way, so callers answer it (HTTP 400, gRPC
// InvalidArgument) or fail for good (a non-retryable activity error).
type InputError struct{ Problems Problems }

// Invalid is the InputError of one problem of field.
func Invalid(field, problem string) *InputError {
	return &InputError{Problems: Problems{{Field: field, Problem: problem}}}
}

func (e *InputError) Error() string {
	return "invalid request: " + e.Problems.String()
}
