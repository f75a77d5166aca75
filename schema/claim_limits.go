package schema

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// How the claim keeps to the concurrency limits (see ARCHITECTURE.md, "Concurrency
// limits"). Every claim runs in one READ COMMITTED transaction that first takes one
// transaction-scoped advisory lock shared by every replica (LockClaims), so claims
// run one at a time and each statement after the lock takes a snapshot in which
// every earlier claim has committed: what it counts as running is what runs. Only a
// claim raises what runs, so a count under the lock stays true until the commit.
//
// Then come rounds. When no label limit exists, a round is one statement
// (ClaimWithinTargetLimits): count what runs on each target, load candidates (FOR
// UPDATE SKIP LOCKED) leaving out the targets at their limit, admit each target's
// first rows as far as its limit has room, and claim them. With label limits a round
// is three (ClaimCandidates, LimitsRunning, ClaimRequests), with admit in Go between.
// A round is repeated only when a limit filled up during the claim itself held a
// candidate back. The one-statement round skips the count when every target has a
// bound (target_claim_bounds) leaving room for a whole batch under its limit, and
// keeps the bounds at or above what runs; the label path drops the bounds of the
// targets it claims on.

// maxClaimRounds bounds the rounds of one claim. A round ends early once nothing was
// held back by a limit filling up during the claim itself.
const maxClaimRounds = 4

// claimCandidate is a pending request the claim may take, with the limits it falls
// under.
type claimCandidate struct {
	id          uuid.UUID
	target      uuid.UUID
	targetLimit string
	targetMax   int
	labelLimits []string
}

// limitRoom is what runs under the limits a round's candidates fall under.
type limitRoom struct {
	targetRunning map[uuid.UUID]int
	labelRunning  map[string]int
	labelMax      map[string]int
}

// fullLimits are the targets and label limits a claim found reached; later rounds
// leave their requests out.
type fullLimits struct {
	targets map[uuid.UUID]bool
	labels  map[string]bool
}

// admit returns the candidates that fit, in order, at most room of them: a candidate
// fits when its target and each of its label limits are below their maximum, counting
// the candidates admitted before it. It records in full every limit that held a
// candidate back. It is the pure part of the claim.
func admit(cands []claimCandidate, r limitRoom, room int, full fullLimits) []uuid.UUID {
	var out []uuid.UUID
	for _, c := range cands {
		if len(out) == room {
			break
		}
		fits := true
		if r.targetRunning[c.target] >= c.targetMax {
			full.targets[c.target] = true
			fits = false
		}
		for _, l := range c.labelLimits {
			if r.labelRunning[l] >= r.labelMax[l] {
				full.labels[l] = true
				fits = false
			}
		}
		if !fits {
			continue
		}
		out = append(out, c.id)
		r.targetRunning[c.target]++
		for _, l := range c.labelLimits {
			r.labelRunning[l]++
		}
	}
	return out
}

// claimWithinLimits claims up to limit pending requests in tx for replica under key,
// keeping to every concurrency limit.
func claimWithinLimits(ctx context.Context, tx pgx.Tx, replica, key string, limit int) (ClaimResult, error) {
	if err := queries.LockClaims(ctx, tx); err != nil {
		return ClaimResult{}, fmt.Errorf("waiting for the claims of other replicas: %w", err)
	}
	var res ClaimResult
	full := fullLimits{targets: map[uuid.UUID]bool{}, labels: map[string]bool{}}
	for round := 0; round < maxClaimRounds && len(res.Claimed) < limit; round++ {
		heldBefore := len(full.targets)
		labelLimited, err := claimWithinTargetRoom(ctx, tx, replica, key, limit-len(res.Claimed), full, &res)
		if err != nil || labelLimited {
			if err == nil {
				err = claimWithLabelLimits(ctx, tx, replica, key, limit, full, &res)
			}
			return res, err
		}
		if len(full.targets) == heldBefore {
			return res, nil // nothing newly full: a further round would load nothing new
		}
	}
	return res, nil
}

// claimWithLabelLimits runs the rounds of a claim when label limits exist: load the
// candidates, count what runs under their limits, admit those that fit, claim them.
func claimWithLabelLimits(ctx context.Context, tx pgx.Tx, replica, key string, limit int, full fullLimits, res *ClaimResult) error {
	for round := 0; round < maxClaimRounds && len(res.Claimed) < limit; round++ {
		cands, err := loadCandidates(ctx, tx, limit-len(res.Claimed), full)
		if err != nil || len(cands) == 0 {
			return err
		}
		heldBefore := len(full.targets) + len(full.labels)
		if err := claimUnderLabelLimits(ctx, tx, replica, key, cands, limit-len(res.Claimed), full, res); err != nil {
			return err
		}
		if len(full.targets)+len(full.labels) == heldBefore {
			return nil // nothing newly full: a further round would load nothing new
		}
	}
	return nil
}

// loadCandidates locks up to n candidates outside the limits found full.
func loadCandidates(ctx context.Context, tx pgx.Tx, n int, full fullLimits) ([]claimCandidate, error) {
	rows, err := queries.ClaimCandidates(ctx, tx, dbsqlc.ClaimCandidatesParams{MaxRows: int32(n),
		SkipTargets: fullTargets(full), SkipLimits: append([]string{}, slices.Collect(maps.Keys(full.labels))...)})
	if err != nil {
		return nil, fmt.Errorf("loading dispatch requests to claim: %w", err)
	}
	out := make([]claimCandidate, 0, len(rows))
	for _, r := range rows {
		c := claimCandidate{id: r.ID, target: r.TargetID, targetLimit: r.TargetLimit, targetMax: int(r.TargetMax), labelLimits: r.LabelLimits}
		if c.targetLimit == "" { // the default's row is gone: the built-in default holds
			c.targetLimit, c.targetMax = domain.DefaultTargetLimit, defaultTargetMaxRun
		}
		out = append(out, c)
	}
	return out, nil
}

// fullTargets lists the targets found full, empty rather than nil: a nil slice is
// sent as NULL, and "<> ALL(NULL)" holds for no row.
func fullTargets(full fullLimits) []uuid.UUID {
	return append([]uuid.UUID{}, slices.Collect(maps.Keys(full.targets))...)
}

// claimWithinTargetRoom is a round of a claim when no label limit exists: it counts,
// loads, admits and claims up to n rows in one statement, appending the rows won to
// res and recording in full the targets that held a candidate back. It claims
// nothing and says so when a label limit exists.
func claimWithinTargetRoom(ctx context.Context, tx pgx.Tx, replica, key string, n int, full fullLimits, res *ClaimResult) (labelLimited bool, err error) {
	rows, err := queries.ClaimWithinTargetLimits(ctx, tx, dbsqlc.ClaimWithinTargetLimitsParams{
		SkipTargets: fullTargets(full), MaxRows: int32(n), Replica: replica, ClaimKey: key})
	if err != nil {
		return false, fmt.Errorf("claiming up to %d dispatch requests: %w", n, err)
	}
	for _, r := range rows { // in claim order
		switch {
		case r.LabelLimited:
			return true, nil
		case !r.Admitted:
			full.targets[r.TargetID] = true
		case !r.Claimed:
			res.Lost++
		default:
			res.Claimed = append(res.Claimed, domain.ClaimedRequest{ID: r.ID, Epoch: r.ClaimEpoch, Target: r.Target, Priority: r.Priority,
				Attempts: int(r.Attempts), CreatedAt: r.CreatedAt})
		}
	}
	return false, nil
}

// claimUnderLabelLimits counts what runs under the candidates' limits, admits those
// that fit (admit), and claims them.
func claimUnderLabelLimits(ctx context.Context, tx pgx.Tx, replica, key string, cands []claimCandidate, room int, full fullLimits, res *ClaimResult) error {
	running, err := countRunning(ctx, tx, cands)
	if err != nil {
		return err
	}
	return claimAdmitted(ctx, tx, replica, key, admit(cands, running, room, full), res)
}

// countRunning counts, after the locks, what runs under the candidates' limits.
func countRunning(ctx context.Context, tx pgx.Tx, cands []claimCandidate) (limitRoom, error) {
	room := limitRoom{targetRunning: map[uuid.UUID]int{}, labelRunning: map[string]int{}, labelMax: map[string]int{}}
	caps := map[uuid.UUID]int{}
	labels := map[string]bool{}
	for _, c := range cands {
		caps[c.target] = c.targetMax
		for _, l := range c.labelLimits {
			labels[l] = true
		}
	}
	p := dbsqlc.LimitsRunningParams{Names: append([]string{}, slices.Collect(maps.Keys(labels))...)}
	for t, c := range caps {
		p.Ids, p.Caps = append(p.Ids, t), append(p.Caps, int32(c))
	}
	rows, err := queries.LimitsRunning(ctx, tx, p)
	if err != nil {
		return room, fmt.Errorf("counting commands running on %d targets and under %d label limits: %w", len(p.Ids), len(p.Names), err)
	}
	for _, r := range rows {
		if r.Scope == domain.LimitScopeLabel {
			room.labelRunning[r.Subject], room.labelMax[r.Subject] = int(r.Running), int(r.MaxRunning)
			continue
		}
		id, err := uuid.Parse(r.Subject)
		if err != nil {
			return room, fmt.Errorf("reading the count of target %q: %w", r.Subject, err)
		}
		room.targetRunning[id] = int(r.Running)
	}
	for l := range labels {
		if _, ok := room.labelMax[l]; !ok {
			room.labelMax[l] = 0 // deleted since the load: hold its rows for the next claim
		}
	}
	return room, nil
}

// claimAdmitted moves the admitted rows to processing and appends them to res.
func claimAdmitted(ctx context.Context, tx pgx.Tx, replica, key string, ids []uuid.UUID, res *ClaimResult) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := queries.ClaimRequests(ctx, tx, dbsqlc.ClaimRequestsParams{Replica: replica, ClaimKey: key, Ids: ids})
	if err != nil {
		return fmt.Errorf("claiming %d dispatch requests: %w", len(ids), err)
	}
	byID := make(map[uuid.UUID]dbsqlc.ClaimRequestsRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, id := range ids { // in claim order
		r, ok := byID[id]
		if !ok {
			res.Lost++
			continue
		}
		res.Claimed = append(res.Claimed, domain.ClaimedRequest{ID: r.ID, Epoch: r.ClaimEpoch, Target: r.Target, Priority: r.Priority,
			Attempts: int(r.Attempts), CreatedAt: r.CreatedAt})
	}
	return nil
}
