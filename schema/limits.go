package schema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Limit is a concurrency limit: at most MaxRunning commands at once on what its
// scope and value cover. Its name is what a held dispatch request's HeldBy shows.
type Limit struct {
	Name       string
	Scope      string
	Label      string
	Value      string
	MaxRunning int
	// CreatedBy, CreatedAt and UpdatedAt record the last write; SetLimit ignores them.
	CreatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// defaultTargetMaxRun is what the default limit (domain.DefaultTargetLimit) allows
// on each target when no row sets it.
const defaultTargetMaxRun = 1

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

// ValidateLimit returns every problem of l by field, or nil.
func ValidateLimit(l Limit) error {
	var problems domain.Problems
	if !limitName.MatchString(l.Name) {
		problems.Addf("name", "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit, got %q",
			safetext.Bound(safetext.DisplayString(l.Name), 80))
	}
	switch l.Scope {
	case domain.LimitScopeTarget:
		if l.Label != "" {
			problems.Add("label", "must be empty for scope target (value names the target)")
		}
		if l.Value != "" && !targetName.MatchString(l.Value) {
			problems.Addf("value", "must be a target name, got %q", safetext.Bound(safetext.DisplayString(l.Value), 80))
		}
		if l.Name == domain.DefaultTargetLimit && l.Value != "" {
			problems.Add("value", "must be empty for "+domain.DefaultTargetLimit+", the default of every target")
		}
	case domain.LimitScopeLabel:
		addLabelProblem(&problems, "label", l.Label)
		addLabelProblem(&problems, "value", l.Value)
		if l.Name == domain.DefaultTargetLimit {
			problems.Add("scope", domain.DefaultTargetLimit+" is the per-target default and keeps scope target")
		}
	default:
		problems.Addf("scope", "must be one of %s, got %q", strings.Join(domain.LimitScopes, ", "),
			safetext.Bound(safetext.DisplayString(l.Scope), 40))
	}
	if l.MaxRunning < 1 || l.MaxRunning > MaxLimitRunning {
		problems.Addf("max_running", "must be 1-%d, got %d", MaxLimitRunning, l.MaxRunning)
	}
	return problems.Err()
}

// addLabelProblem adds what is wrong with a label limit's label key or value.
func addLabelProblem(problems *domain.Problems, field, s string) {
	if s == "" {
		problems.Add(field, "required for scope label")
	} else if p := safetext.Unstorable(s, maxLimitLabelBytes); p != "" {
		problems.Add(field, p)
	}
}

// SetLimit stores l under its name (replacing what the name held), recorded as set by
// by, and wakes the dispatchers so that requests a raised limit frees are claimed at
// once. It refuses an invalid limit with *domain.InputError and one that covers what
// another limit covers with ErrLimitConflict.
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
	if name == domain.DefaultTargetLimit {
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

// limitOf is the Limit a concurrency_limits row holds.
func limitOf(r dbsqlc.ConcurrencyLimit) Limit {
	l := Limit{Name: r.Name, Scope: r.Scope, MaxRunning: int(r.MaxRunning), CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.Label != nil {
		l.Label = *r.Label
	}
	if r.Value != nil {
		l.Value = *r.Value
	}
	return l
}
