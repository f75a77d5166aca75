package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/freeze"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// ErrFreezeExists is returned when a freeze of that name already exists.
var ErrFreezeExists = errors.New("a freeze of that name already exists")

// Freeze is a stored freeze window; Active says whether it holds at the time read.
type Freeze struct {
	freeze.Definition
	Active    bool
	CreatedBy string
	CreatedAt time.Time
}

// BlockingFreeze is an active freeze that matches some of a deployment's targets:
// Targets of them, FirstTarget among them.
type BlockingFreeze struct {
	Name        string
	Reason      string
	Targets     int
	FirstTarget string
}

// CreateFreeze stores f on behalf of actor; a *domain.InputError lists every problem
// freeze.Problems finds.
func CreateFreeze(ctx context.Context, db DB, f freeze.Definition, actor string) (Freeze, error) {
	if err := freeze.Problems(f).Err(); err != nil {
		return Freeze{}, err
	}
	sel := f.Selector
	if sel == nil {
		sel = map[string]string{}
	}
	selJSON, err := json.Marshal(sel)
	if err != nil {
		return Freeze{}, err
	}
	var weekly []byte
	if f.Weekly != nil {
		if weekly, err = json.Marshal(f.Weekly); err != nil {
			return Freeze{}, err
		}
	}
	row, err := queries.InsertFreeze(ctx, db, dbsqlc.InsertFreezeParams{
		Name: f.Name, Selector: selJSON, Reason: f.Reason, StartsAt: f.StartsAt, EndsAt: f.EndsAt, Weekly: weekly, CreatedBy: actor,
	})
	if err = notFound(err); errors.Is(err, ErrNotFound) {
		return Freeze{}, ErrFreezeExists
	}
	if err != nil {
		return Freeze{}, fmt.Errorf("creating freeze %s: %w", f.Name, err)
	}
	return freezeView(row, time.Now())
}

// ListFreezes returns every freeze by name, each with whether it is active at now.
func ListFreezes(ctx context.Context, db DB, now time.Time) ([]Freeze, error) {
	rows, err := queries.ListFreezes(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("listing freezes: %w", err)
	}
	return convertRows(rows, func(r dbsqlc.Freeze) (Freeze, error) { return freezeView(r, now) })
}

// GetFreeze returns the freeze named name, with whether it is active at now;
// ErrNotFound when there is none.
func GetFreeze(ctx context.Context, db DB, name string, now time.Time) (Freeze, error) {
	r, err := queries.GetFreeze(ctx, db, name)
	if err != nil {
		return Freeze{}, fmt.Errorf("reading freeze %s: %w", name, notFound(err))
	}
	return freezeView(r, now)
}

// DeleteFreeze removes the freeze named name; ErrNotFound when there is none.
func DeleteFreeze(ctx context.Context, db DB, name string) error {
	n, err := queries.DeleteFreeze(ctx, db, name)
	return touched(n, err, "deleting freeze "+name)
}

// BlockingFreezes returns the freezes active at now that match some of targets.
func BlockingFreezes(ctx context.Context, db DB, targets []string, now time.Time) ([]BlockingFreeze, error) {
	rows, err := queries.FreezesMatchingTargets(ctx, db, targets)
	if err != nil {
		return nil, fmt.Errorf("reading the freezes of %d targets: %w", len(targets), err)
	}
	out := []BlockingFreeze{}
	for _, r := range rows {
		w, err := window(r.StartsAt, r.EndsAt, r.Weekly)
		if err != nil {
			return nil, fmt.Errorf("reading freeze %s: %w", r.Name, err)
		}
		if w.ActiveAt(now) {
			out = append(out, BlockingFreeze{Name: r.Name, Reason: r.Reason, Targets: int(r.Matched), FirstTarget: r.FirstTarget})
		}
	}
	return out, nil
}

// RecordFreezeOverride records on a deployment, with a deployment.freeze_overridden
// event in the same transaction, that actor overrode the freezes.
func RecordFreezeOverride(ctx context.Context, db TxBeginner, id uuid.UUID, actor string, freezes []BlockingFreeze) error {
	data := events.FreezeOverriddenData{Actor: actor}
	for _, f := range freezes {
		data.Freezes = append(data.Freezes, f.Name)
		data.Reasons = append(data.Reasons, f.Reason)
	}
	return inTx(ctx, db, func(tx pgx.Tx) error {
		if err := queries.RecordFreezeOverride(ctx, tx, dbsqlc.RecordFreezeOverrideParams{ID: id, Actor: &actor, Freezes: data.Freezes}); err != nil {
			return fmt.Errorf("recording the freeze override of deployment %s: %w", id, err)
		}
		return InsertEvent(ctx, tx, &id, events.DeploymentFreezeOverridden, data)
	})
}

// FreezeMayRefuse reports whether a freeze may still refuse deployment id: it is
// pending (not started, so a retried start is not refused half-way) and nobody
// overrode the freezes when creating it.
func FreezeMayRefuse(ctx context.Context, db DB, id uuid.UUID) (bool, error) {
	row, err := queries.DeploymentFreezeState(ctx, db, id)
	if err != nil {
		return false, fmt.Errorf("reading the freeze state of deployment %s: %w", id, notFound(err))
	}
	return row.Status == domain.DeploymentPending && row.FreezeOverrideBy == nil, nil
}

// freezeView is a stored freeze as it stands at now.
func freezeView(r dbsqlc.Freeze, now time.Time) (Freeze, error) {
	f := Freeze{Definition: freeze.Definition{Name: r.Name, Reason: r.Reason, StartsAt: r.StartsAt, EndsAt: r.EndsAt},
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
	if err := json.Unmarshal(r.Selector, &f.Selector); err != nil {
		return Freeze{}, fmt.Errorf("reading the selector of freeze %s: %w", r.Name, err)
	}
	w, err := window(r.StartsAt, r.EndsAt, r.Weekly)
	if err != nil {
		return Freeze{}, fmt.Errorf("reading freeze %s: %w", r.Name, err)
	}
	f.Weekly, f.Active = w.Weekly, w.ActiveAt(now)
	return f, nil
}

// window is the freeze.Window of a stored freeze.
func window(start, end *time.Time, weekly []byte) (freeze.Window, error) {
	w := freeze.Window{StartsAt: start, EndsAt: end}
	if len(weekly) > 0 {
		w.Weekly = &freeze.WeeklyWindow{}
		if err := json.Unmarshal(weekly, w.Weekly); err != nil {
			return freeze.Window{}, fmt.Errorf("decoding its weekly window: %w", err)
		}
	}
	return w, nil
}
