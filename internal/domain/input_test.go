package domain_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mantis-deploy/mantis/internal/domain"
)

// An input error prints each problem as "field: problem" (the problem alone when it
// names no field), the text users have always been shown, and is found through
// wrapping.
func TestInputErrorPrintsEveryProblemByField(t *testing.T) {
	t.Parallel()
	var ps domain.Problems
	ps.Add("name", "required")
	ps.Addf("targets[1]", "unknown target %q", "web-9")
	ps.Add("", "deployment_id and step_position go together")
	err := fmt.Errorf("starting: %w", ps.Err())
	var inputErr *domain.InputError
	if !errors.As(err, &inputErr) {
		t.Fatalf("%v is not an *InputError", err)
	}
	want := `invalid request: name: required; targets[1]: unknown target "web-9"; deployment_id and step_position go together`
	if got := inputErr.Error(); got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if got := domain.Invalid("step 3", "no such step").Error(); got != "invalid request: step 3: no such step" {
		t.Fatalf("Invalid: %q", got)
	}
}

// No problems is no error: a nil error interface, not a nil *InputError in one.
func TestNoProblemsIsNoError(t *testing.T) {
	t.Parallel()
	var ps domain.Problems
	if err := ps.Err(); err != nil {
		t.Fatalf("Err() = %#v, want nil", err)
	}
}
