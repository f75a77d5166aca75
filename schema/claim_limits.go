package schema

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// How the claim keeps to the concurrency limits (see ARCHITECTURE.md, "Concurrency
// limits"). Every claim runs in one READ COMMITTED transaction, in rounds:
//
//  1. load candidates (FOR UPDATE SKIP LOCKED), leaving out rows whose target or
//     label limit is already reached;
//  2. take a transaction-scoped advisory lock per limit key the candidates touch
//     (a stripe of target ids, and each label limit by name);
//  3. count what runs under each key in a new statement, so with a snapshot taken
//     after the lock: every claim that counted under a key before us has committed;
//  4. admit candidates in claim order while every limit they fall under has room
//     (admit), and claim those.
//
// The first round waits for its locks, taken in ascending order, so two claims never
// wait on each other in a cycle; later rounds only take the locks that are free.
const (
	// maxClaimRounds bounds the rounds of one claim. A round ends early once nothing
	// was held back by a limit filling up during the claim itself.
	maxClaimRounds = 4
	// targetLockStripes is how many advisory locks the targets share: a claim takes at
	// most this many target locks whatever its batch, and two targets of one stripe
	// only wait on each other.
	targetLockStripes = 256
)

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
		cands, err := loadCandidates(ctx, tx, limit-len(res.Claimed), full)
		if err != nil || len(cands) == 0 {
			return res, err
		}
		if cands, err = lockLimitKeys(ctx, tx, cands, round == 0); err != nil {
			return res, err
		}
		room, err := countRunning(ctx, tx, cands)
		if err != nil {
			return res, err
		}
		heldBefore := len(full.targets) + len(full.labels)
		ids := admit(cands, room, limit-len(res.Claimed), full)
		if err := claimAdmitted(ctx, tx, replica, key, ids, &res); err != nil {
			return res, err
		}
		if len(full.targets)+len(full.labels) == heldBefore {
			return res, nil // nothing newly full: a further round would load nothing new
		}
	}
	return res, nil
}

// loadCandidates locks up to n candidates outside the limits found full.
func loadCandidates(ctx context.Context, tx pgx.Tx, n int, full fullLimits) ([]claimCandidate, error) {
	skipTargets := make([]uuid.UUID, 0, len(full.targets))
	for t := range full.targets {
		skipTargets = append(skipTargets, t)
	}
	skipLimits := make([]string, 0, len(full.labels))
	for l := range full.labels {
		skipLimits = append(skipLimits, l)
	}
	rows, err := queries.ClaimCandidates(ctx, tx, dbsqlc.ClaimCandidatesParams{MaxRows: int32(n), SkipTargets: skipTargets, SkipLimits: skipLimits})
	if err != nil {
		return nil, fmt.Errorf("loading dispatch requests to claim: %w", err)
	}
	out := make([]claimCandidate, len(rows))
	for i, r := range rows {
		c := claimCandidate{id: r.ID, target: r.TargetID, targetLimit: r.TargetLimit, targetMax: int(r.TargetMax), labelLimits: r.LabelLimits}
		if c.targetLimit == "" { // the default's row is gone: the built-in default holds
			c.targetLimit, c.targetMax = DefaultTargetLimit, defaultTargetMaxRun
		}
		out[i] = c
	}
	return out, nil
}

// lockLimitKeys takes the advisory locks of the candidates' limit keys: waiting for
// them, in ascending order, when wait is set, and otherwise only those free now, in
// which case the candidates whose keys are not all held are dropped.
func lockLimitKeys(ctx context.Context, tx pgx.Tx, cands []claimCandidate, wait bool) ([]claimCandidate, error) {
	keysOf := func(c claimCandidate) []int64 {
		keys := []int64{targetLockKey(c.target)}
		for _, l := range c.labelLimits {
			keys = append(keys, labelLockKey(l))
		}
		return keys
	}
	var keys []int64
	for _, c := range cands {
		keys = append(keys, keysOf(c)...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if wait {
		if err := queries.LockLimitKeys(ctx, tx, keys); err != nil {
			return nil, fmt.Errorf("locking %d concurrency limit keys: %w", len(keys), err)
		}
		return cands, nil
	}
	rows, err := queries.TryLockLimitKeys(ctx, tx, keys)
	if err != nil {
		return nil, fmt.Errorf("locking %d concurrency limit keys: %w", len(keys), err)
	}
	held := map[int64]bool{}
	for _, r := range rows {
		held[r.Key] = r.Locked
	}
	return slices.DeleteFunc(cands, func(c claimCandidate) bool {
		return slices.ContainsFunc(keysOf(c), func(k int64) bool { return !held[k] })
	}), nil
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
	var p dbsqlc.TargetsRunningParams
	for t, c := range caps {
		p.Ids, p.Caps = append(p.Ids, t), append(p.Caps, int32(c))
	}
	targets, err := queries.TargetsRunning(ctx, tx, p)
	if err != nil {
		return room, fmt.Errorf("counting commands running on %d targets: %w", len(p.Ids), err)
	}
	for _, r := range targets {
		room.targetRunning[r.ID] = int(r.Running)
	}
	if len(labels) == 0 {
		return room, nil
	}
	rows, err := queries.LabelLimitsRunning(ctx, tx, slices.Collect(maps.Keys(labels)))
	if err != nil {
		return room, fmt.Errorf("counting commands running under %d label limits: %w", len(labels), err)
	}
	for _, r := range rows {
		room.labelRunning[r.Name], room.labelMax[r.Name] = int(r.Running), int(r.MaxRunning)
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

// targetLockKey is the advisory lock key of a target's stripe.
func targetLockKey(target uuid.UUID) int64 {
	return lockKey(fmt.Sprintf("mantis/limit/target/%d", binary.BigEndian.Uint64(target[8:])%targetLockStripes))
}

// labelLockKey is the advisory lock key of a label limit.
func labelLockKey(name string) int64 { return lockKey("mantis/limit/label/" + name) }

// lockKey hashes s into the advisory lock space.
func lockKey(s string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return int64(h.Sum64())
}
