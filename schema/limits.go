package schema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Limit is a concurrency limit: the API's own type (internal/contract/api), filled here.
type Limit = api.Limit

// The scopes of a limit (concurrency_limits.scope) and the default's name.
const (
	LimitScopeTarget    = api.LimitScopeTarget
	LimitScopeLabel     = api.LimitScopeLabel
	DefaultTargetLimit  = api.DefaultTargetLimit
	defaultTargetMaxRun = 1
)

// LimitScopes lists every limit scope.
var LimitScopes = []string{LimitScopeTarget, LimitScopeLabel}

// Bounds on a limit, as the migration's CHECKs hold them.
const (
	// MaxLimitRunning is the largest max_running a limit may set.
	MaxLimitRunning = 100000
	// maxLimitLabelBytes bounds a label key and a value (a target name or a label value).
	maxLimitLabelBytes = 253
)

// limitName is the shape of a limit's name (concurrency_limits.name).
var limitName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ErrLimitConflict is returned when another limit already covers what a limit would
// cover: one limit per target, per label value, and one default.
var ErrLimitConflict = errors.New("another limit covers the same thing")

// ErrDefaultLimit is returned when the per-target default would be deleted or made
// into another kind of limit.
var ErrDefaultLimit = errors.New("the per-target default limit may be changed but not deleted")

// ValidateLimit returns every problem of l, each as "field: problem", or nil.
func ValidateLimit(l Limit) *InputError {
	var problems []string
	if !limitName.MatchString(l.Name) {
		problems = append(problems, fmt.Sprintf("name: must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit, got %q",
			safetext.Bound(safetext.DisplayString(l.Name), 80)))
	}
	switch l.Scope {
	case LimitScopeTarget:
		if l.Label != "" {
			problems = append(problems, "label: must be empty for scope target (value names the target)")
		}
		if l.Value != "" && !targetName.MatchString(l.Value) {
			problems = append(problems, fmt.Sprintf("value: must be a target name, got %q", safetext.Bound(safetext.DisplayString(l.Value), 80)))
		}
		if l.Name == DefaultTargetLimit && l.Value != "" {
			problems = append(problems, "value: must be empty for "+DefaultTargetLimit+", the default of every target")
		}
	case LimitScopeLabel:
		problems = appendLabelProblem(problems, "label", l.Label)
		problems = appendLabelProblem(problems, "value", l.Value)
		if l.Name == DefaultTargetLimit {
			problems = append(problems, "scope: "+DefaultTargetLimit+" is the per-target default and keeps scope target")
		}
	default:
		problems = append(problems, fmt.Sprintf("scope: must be one of %s, got %q", strings.Join(LimitScopes, ", "),
			safetext.Bound(safetext.DisplayString(l.Scope), 40)))
	}
	if l.MaxRunning < 1 || l.MaxRunning > MaxLimitRunning {
		problems = append(problems, fmt.Sprintf("max_running: must be 1-%d, got %d", MaxLimitRunning, l.MaxRunning))
	}
	if len(problems) == 0 {
		return nil
	}
	return &InputError{Problems: problems}
}

// appendLabelProblem adds what is wrong with a label limit's label key or value.
func appendLabelProblem(problems []string, field, s string) []string {
	if s == "" {
		return append(problems, field+": required for scope label")
	}
	if p := safetext.Unstorable(s, maxLimitLabelBytes); p != "" {
		return append(problems, field+": "+p)
	}
	return problems
}

// SetLimit stores l under its name (replacing what the name held), recorded as set by
// by, and wakes the dispatchers so that requests a raised limit frees are claimed at
// once. It refuses an invalid limit with *InputError and one that covers what another
// limit covers with ErrLimitConflict.
func SetLimit(ctx context.Context, db TxBeginner, l Limit, by string) (Limit, error) {
	if err := ValidateLimit(l); err != nil {
		return Limit{}, err
	}
	var out Limit
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		row, err := queries.UpsertLimit(ctx, tx, dbsqlc.UpsertLimitParams{Name: l.Name, Scope: l.Scope,
			Label: nullString(l.Label), Value: nullString(l.Value), MaxRunning: int32(l.MaxRunning), CreatedBy: by})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return fmt.Errorf("setting limit %s: %w", l.Name, ErrLimitConflict)
		}
		if err != nil {
			return fmt.Errorf("setting limit %s: %w", l.Name, err)
		}
		out = limitOf(row)
		if err := queries.WakeDispatchers(ctx, tx); err != nil {
			return fmt.Errorf("waking dispatchers after setting limit %s: %w", l.Name, err)
		}
		return nil
	})
	return out, err
}

// LimitByName returns the named limit, or ErrNotFound.
func LimitByName(ctx context.Context, db DB, name string) (Limit, error) {
	row, err := queries.LimitByName(ctx, db, name)
	if err != nil {
		return Limit{}, fmt.Errorf("reading limit %s: %w", name, notFound(err))
	}
	return limitOf(row), nil
}

// ListLimits returns every limit by name.
func ListLimits(ctx context.Context, db DB) ([]Limit, error) {
	rows, err := queries.ListLimits(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("listing limits: %w", err)
	}
	out := make([]Limit, len(rows))
	for i, r := range rows {
		out[i] = limitOf(r)
	}
	return out, nil
}

// DeleteLimit removes the named limit and wakes the dispatchers; ErrNotFound when
// there is none, ErrDefaultLimit for the per-target default.
func DeleteLimit(ctx context.Context, db TxBeginner, name string) error {
	if name == DefaultTargetLimit {
		return ErrDefaultLimit
	}
	return inTx(ctx, db, func(tx pgx.Tx) error {
		n, err := queries.DeleteLimit(ctx, tx, name)
		if err := touched(n, err, "deleting limit "+name); err != nil {
			return err
		}
		if err := queries.WakeDispatchers(ctx, tx); err != nil {
			return fmt.Errorf("waking dispatchers after deleting limit %s: %w", name, err)
		}
		return nil
	})
}

// limitOf converts a stored limit to the API's type.
func limitOf(r dbsqlc.ConcurrencyLimit) Limit {
	l := Limit{Name: r.Name, Scope: r.Scope, MaxRunning: int(r.MaxRunning), CreatedBy: r.CreatedBy, CreatedAt: &r.CreatedAt, UpdatedAt: &r.UpdatedAt}
	if r.Label != nil {
		l.Label = *r.Label
	}
	if r.Value != nil {
		l.Value = *r.Value
	}
	return l
}
