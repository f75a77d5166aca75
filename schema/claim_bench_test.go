package schema_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// bareClaimSQL is the textbook SKIP LOCKED claim in one statement, the baseline of
// BenchmarkClaimAgainstBare (as of BenchmarkDispatchClaim in internal/testrig/e2e).
const bareClaimSQL = `
	UPDATE pending_dispatch_requests
	SET status = 'processing', claimed_by = $1, claimed_at = now()
	WHERE id IN (
	    SELECT id FROM pending_dispatch_requests
	    WHERE status = 'pending'
	    ORDER BY priority_rank, created_at
	    LIMIT $2
	    FOR UPDATE SKIP LOCKED)
	RETURNING id`

// unlimitedClaimSQL is the claim as it was before concurrency limits: the eligibility
// filters, the claim epoch and the lost-candidate accounting in one statement, no
// limit. It is the third point of BenchmarkClaimAgainstBare.
const unlimitedClaimSQL = `
	WITH candidates AS (
	    SELECT id, priority_rank, created_at FROM pending_dispatch_requests
	    WHERE status = 'pending' AND next_attempt_at <= now() AND expires_at > now()
	    ORDER BY priority_rank, created_at
	    LIMIT $2
	    FOR UPDATE SKIP LOCKED
	), claimed AS (
	    UPDATE pending_dispatch_requests p
	    SET status = 'processing', claimed_by = $1, claimed_at = now(), claim_epoch = p.claim_epoch + 1
	    FROM candidates c WHERE p.id = c.id AND p.status = 'pending'
	    RETURNING p.id, p.claim_epoch, p.target_id, p.priority, p.attempts, p.created_at
	)
	SELECT c.id, cl.claim_epoch, t.name FROM candidates c
	LEFT JOIN claimed cl ON cl.id = c.id LEFT JOIN targets t ON t.id = cl.target_id
	ORDER BY c.priority_rank, c.created_at`

// benchClaimer claims up to benchLimitBatch rows and says how many it won.
type benchClaimer func(ctx context.Context, conn *pgx.Conn) (int, error)

// BenchmarkClaimAgainstBare drains a queue of 1,000 labelled targets, 10 requests
// each, one of each target in turn (no label limit, the per-target default at 1 so
// that it binds), in claims of 100 with ClaimPending, with the bare SKIP LOCKED claim and with
// the claim as it was before limits, in one run. After each claim its rows leave
// processing (delivered, their commands ended), untimed. The figures are rows claimed
// per second and each one's ratio to the bare claim.
func BenchmarkClaimAgainstBare(b *testing.B) {
	sides := []struct {
		name  string
		claim benchClaimer
	}{
		{"claimpending", func(ctx context.Context, conn *pgx.Conn) (int, error) {
			res, err := schema.ClaimPending(ctx, conn, replica, benchLimitBatch)
			return len(res.Claimed), err
		}},
		{"bare", func(ctx context.Context, conn *pgx.Conn) (int, error) {
			return countRows(conn.Query(ctx, bareClaimSQL, replica, benchLimitBatch))
		}},
		{"unlimited", func(ctx context.Context, conn *pgx.Conn) (int, error) {
			return countRows(conn.Query(ctx, unlimitedClaimSQL, replica, benchLimitBatch))
		}},
	}
	took := make([]time.Duration, len(sides))
	cpu := make([]time.Duration, len(sides))
	for range b.N {
		for i, s := range sides {
			wall, server := drainWith(b, s.claim)
			took[i] += wall
			cpu[i] += server
		}
	}
	rows := float64(b.N * benchLimitTargets * benchLimitPerTarget)
	b.ReportMetric(0, "ns/op")
	for i, s := range sides {
		b.ReportMetric(rows/took[i].Seconds(), s.name+"-rows/s")
		if cpu[i] > 0 {
			b.ReportMetric(float64(cpu[i].Microseconds())/1000/(rows/benchLimitBatch), s.name+"-pg-cpu-ms/claim")
		}
		if i > 0 {
			b.ReportMetric(took[i].Seconds()/took[0].Seconds(), "claimpending/"+s.name)
		}
	}
}

// countRows counts the rows of a query's answer.
func countRows(rows pgx.Rows, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// drainWith claims a fresh queue empty with claim on a connection of its own and
// returns the time spent claiming and the CPU time its PostgreSQL backend spent over
// the drain (claims and the untimed updates; zero when the server's process cannot
// be read): on a loaded machine the wall time includes waiting for a CPU, the
// backend's CPU time does not.
func drainWith(b *testing.B, claim benchClaimer) (time.Duration, time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	bd := fillLimitsQueue(b, false, true)
	_, err := schema.SetLimit(bd.ctx, bd.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: 1}, "bench")
	require.NoError(b, err)
	conn, err := bd.pool.Acquire(bd.ctx)
	require.NoError(b, err)
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	cpuBefore := backendCPU(pid)
	var claiming time.Duration
	claimed := 0
	for {
		start := time.Now()
		n, err := claim(bd.ctx, conn.Conn())
		claiming += time.Since(start)
		require.NoError(b, err)
		if n == 0 {
			break
		}
		claimed += n
		_, err = conn.Exec(bd.ctx, `UPDATE pending_dispatch_requests SET status = 'dispatched', dispatched_at = now() WHERE status = 'processing'`)
		require.NoError(b, err)
	}
	require.Equal(b, benchLimitTargets*benchLimitPerTarget, claimed)
	cpuAfter := backendCPU(pid)
	if cpuBefore < 0 || cpuAfter < 0 {
		return claiming, 0
	}
	return claiming, cpuAfter - cpuBefore
}

// clockTicks is the unit of /proc/PID/stat's CPU times on Linux.
const clockTicks = 100

// backendCPU is the user and system CPU time of the local process pid, or -1 when it
// cannot be read (another host, another OS).
func backendCPU(pid uint32) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// Fields after the command name, which is in parentheses and may hold spaces:
	// utime and stime are the 12th and 13th.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}
