package schema

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// How the claim keeps to the concurrency limits (see ARCHITECTURE.md, "Concurrency
// limits"). Every claim runs in one READ COMMITTED transaction, in rounds of two
// statements each:
//
//  1. ClaimCandidates loads candidates (FOR UPDATE SKIP LOCKED), leaving out rows whose
//     target or label limit is already reached, and in the same statement takes a
//     transaction-scoped advisory lock per limit key the candidates touch (a stripe of
//     target ids, and each label limit by name), in ascending order;
//  2. a second statement, so with a snapshot taken after the locks (every claim that
//     counted under a key before us has committed), counts what runs under each key
//     and claims the candidates in claim order while every limit they fall under has
//     room. When no candidate falls under a label limit, counting, admitting and
//     claiming are that one statement (ClaimWithinTargetRoom); otherwise the counts
//     come back (LimitsRunning), admit decides, and ClaimRequests claims.
//
// The first round waits for its locks, taken in ascending order, so two claims never
// wait on each other in a cycle; later rounds only take the locks that are free. The
// targets share 256 advisory locks (ClaimCandidates keys a target by the last byte of
// its id): a claim takes at most 256 target locks whatever its batch, and two targets
// of one stripe only wait on each other.

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
	var res ClaimResult
	full := fullLimits{targets: map[uuid.UUID]bool{}, labels: map[string]bool{}}
	for round := 0; round < maxClaimRounds && len(res.Claimed) < limit; round++ {
		cands, err := loadCandidates(ctx, tx, limit-len(res.Claimed), full, round == 0)
		if err != nil || len(cands) == 0 {
			return res, err
		}
		heldBefore := len(full.targets) + len(full.labels)
		if slices.ContainsFunc(cands, func(c claimCandidate) bool { return len(c.labelLimits) > 0 }) {
			err = claimUnderLabelLimits(ctx, tx, replica, key, cands, limit-len(res.Claimed), full, &res)
		} else {
			err = claimWithinTargetRoom(ctx, tx, replica, key, cands, full, &res)
		}
		if err != nil {
			return res, err
		}
		if len(full.targets)+len(full.labels) == heldBefore {
			return res, nil // nothing newly full: a further round would load nothing new
		}
	}
	return res, nil
}

// loadCandidates locks up to n candidates outside the limits found full, and the
// advisory locks of their limit keys: waiting for them when wait is set, and
// otherwise only those free now, in which case the candidates whose keys are not all
// held are dropped.
func loadCandidates(ctx context.Context, tx pgx.Tx, n int, full fullLimits, wait bool) ([]claimCandidate, error) {
	// Empty rather than nil: a nil slice is sent as NULL, and "<> ALL(NULL)" holds for no row.
	skipTargets := append([]uuid.UUID{}, slices.Collect(maps.Keys(full.targets))...)
	skipLimits := append([]string{}, slices.Collect(maps.Keys(full.labels))...)
	rows, err := queries.ClaimCandidates(ctx, tx, dbsqlc.ClaimCandidatesParams{MaxRows: int32(n), Wait: wait,
		SkipTargets: skipTargets, SkipLimits: skipLimits})
	if err != nil {
		return nil, fmt.Errorf("loading dispatch requests to claim: %w", err)
	}
	out := make([]claimCandidate, 0, len(rows))
	for _, r := range rows {
		if !r.Held {
			continue
		}
		c := claimCandidate{id: r.ID, target: r.TargetID, targetLimit: r.TargetLimit, targetMax: int(r.TargetMax), labelLimits: r.LabelLimits}
		if c.targetLimit == "" { // the default's row is gone: the built-in default holds
			c.targetLimit, c.targetMax = DefaultTargetLimit, defaultTargetMaxRun
		}
		out = append(out, c)
	}
	return out, nil
}

// claimWithinTargetRoom counts, admits and claims in one statement candidates that
// fall under no label limit, appending the rows won to res and recording in full the
// targets that held a candidate back.
func claimWithinTargetRoom(ctx context.Context, tx pgx.Tx, replica, key string, cands []claimCandidate, full fullLimits, res *ClaimResult) error {
	p := dbsqlc.ClaimWithinTargetRoomParams{Replica: replica, ClaimKey: key}
	for _, c := range cands {
		p.Ids, p.TargetIds, p.Caps = append(p.Ids, c.id), append(p.TargetIds, c.target), append(p.Caps, int32(c.targetMax))
	}
	rows, err := queries.ClaimWithinTargetRoom(ctx, tx, p)
	if err != nil {
		return fmt.Errorf("claiming %d dispatch requests: %w", len(cands), err)
	}
	for i, r := range rows { // in claim order, as given
		switch {
		case !r.Admitted:
			full.targets[cands[i].target] = true
		case !r.Claimed:
			res.Lost++
		default:
			res.Claimed = append(res.Claimed, ClaimedRequest{ID: r.ID, Epoch: r.ClaimEpoch, Target: r.Target, Priority: r.Priority,
				Attempts: int(r.Attempts), CreatedAt: r.CreatedAt})
		}
	}
	return nil
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
		if r.Scope == LimitScopeLabel {
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
		res.Claimed = append(res.Claimed, ClaimedRequest{ID: r.ID, Epoch: r.ClaimEpoch, Target: r.Target, Priority: r.Priority,
			Attempts: int(r.Attempts), CreatedAt: r.CreatedAt})
	}
	return nil
}
