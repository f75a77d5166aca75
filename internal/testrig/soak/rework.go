package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Rework is the work the cluster did for the dispatch requests created while the load
// ran, against what it had to do: how many deliveries (command rows) each took, what
// was cancelled and why, why requests failed, and the SQL it ran. A cluster that keeps
// its goodput under load delivers each succeeded request once.
type Rework struct {
	Requests, Succeeded, Failed, Expired, Open int
	// Commands counts the command rows written for those requests: one per delivery.
	Commands int
	// Deliveries counts requests by how many deliveries they took (1, 2, 3, 4 or more).
	Deliveries [4]int
	// Cancelled counts the cancelled commands by reason, most first; Failures the
	// failed and expired requests by their last error.
	Cancelled, Failures []Count
	// Statements is what PostgreSQL ran while the load ran (pg_stat_statements of the
	// cluster's database); nil when not read.
	Statements *Statements
}

// DB is what the rework reads with: a pool or a connection.
type DB interface {
	Querier
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Count is how many times one reason came up.
type Count struct {
	What string
	N    int
}

// Statements sums pg_stat_statements for one database.
type Statements struct {
	Calls int64
	// Top are the most frequent statements, most first.
	Top []StatementCalls
}

// StatementCalls is one normalised statement and how often it ran.
type StatementCalls struct {
	Query string
	Calls int64
}

// reworkSQL counts the requests created since $1 by outcome, their command rows, and
// the requests by how many deliveries they took.
const reworkSQL = `
WITH r AS (
    SELECT p.status, p.id,
           (SELECT count(*) FROM command_queue q WHERE q.dispatch_request_id = p.id) AS deliveries,
           EXISTS (SELECT 1 FROM command_queue q WHERE q.dispatch_request_id = p.id AND q.status = 'succeeded') AS succeeded
    FROM pending_dispatch_requests p WHERE p.created_at >= $1::timestamptz
)
SELECT count(*), count(*) FILTER (WHERE succeeded), count(*) FILTER (WHERE status = 'failed'),
       count(*) FILTER (WHERE status = 'expired'),
       count(*) FILTER (WHERE NOT succeeded AND status NOT IN ('failed', 'expired', 'cancelled')),
       coalesce(sum(deliveries), 0),
       count(*) FILTER (WHERE deliveries = 1), count(*) FILTER (WHERE deliveries = 2),
       count(*) FILTER (WHERE deliveries = 3), count(*) FILTER (WHERE deliveries >= 4)
FROM r`

// reasonsSQL groups reasons with their ids and numbers masked, so that one reason of
// many commands is one line; $2 picks cancelled commands or failed requests.
const reasonsSQL = `
SELECT regexp_replace(coalesce(reason, ''), '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9]+', '#', 'g'), count(*)
FROM (
    SELECT q.error AS reason FROM command_queue q
    JOIN pending_dispatch_requests p ON p.id = q.dispatch_request_id
    WHERE $2::text = 'cancelled' AND p.created_at >= $1::timestamptz AND q.status = 'cancelled'
    UNION ALL
    SELECT p.last_error FROM pending_dispatch_requests p
    WHERE $2::text = 'failed' AND p.created_at >= $1::timestamptz AND p.status IN ('failed', 'expired')
) s
GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 8`

// ReadRework reads the rework of the requests created since start.
func ReadRework(ctx context.Context, db DB, start time.Time) (Rework, error) {
	var r Rework
	err := db.QueryRow(ctx, reworkSQL, start).Scan(&r.Requests, &r.Succeeded, &r.Failed, &r.Expired, &r.Open,
		&r.Commands, &r.Deliveries[0], &r.Deliveries[1], &r.Deliveries[2], &r.Deliveries[3])
	if err != nil {
		return r, fmt.Errorf("counting deliveries: %w", err)
	}
	if r.Cancelled, err = reasons(ctx, db, start, "cancelled"); err != nil {
		return r, err
	}
	r.Failures, err = reasons(ctx, db, start, "failed")
	return r, err
}

func reasons(ctx context.Context, db Querier, start time.Time, which string) ([]Count, error) {
	rows, err := db.Query(ctx, reasonsSQL, start, which)
	if err != nil {
		return nil, fmt.Errorf("grouping %s reasons: %w", which, err)
	}
	defer rows.Close()
	var out []Count
	for rows.Next() {
		var c Count
		if err := rows.Scan(&c.What, &c.N); err != nil {
			return nil, fmt.Errorf("grouping %s reasons: %w", which, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Statement counts need the pg_stat_statements library loaded by the server
// (devstack.Options.PostgresStatements) and its extension in the database read from.
const (
	statementsExtensionSQL = `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
	statementsResetSQL     = `SELECT pg_stat_statements_reset()`
	statementsSumSQL       = `
SELECT coalesce(sum(s.calls), 0)::bigint FROM pg_stat_statements s
JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`
	statementsTopSQL = `
SELECT left(regexp_replace(s.query, '\s+', ' ', 'g'), 110), s.calls FROM pg_stat_statements s
JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1
ORDER BY s.calls DESC LIMIT 8`
)

// ResetStatements creates the extension when missing and zeroes its counts; admin is a
// superuser's connection (pg_stat_statements_reset is theirs).
func ResetStatements(ctx context.Context, admin DB) error {
	if _, err := admin.Exec(ctx, statementsExtensionSQL); err != nil {
		return fmt.Errorf("creating pg_stat_statements: %w", err)
	}
	if _, err := admin.Exec(ctx, statementsResetSQL); err != nil {
		return fmt.Errorf("resetting pg_stat_statements: %w", err)
	}
	return nil
}

// ReadStatements sums what the database named database ran since the reset.
func ReadStatements(ctx context.Context, admin DB, database string) (*Statements, error) {
	var s Statements
	if err := admin.QueryRow(ctx, statementsSumSQL, database).Scan(&s.Calls); err != nil {
		return nil, fmt.Errorf("reading pg_stat_statements: %w", err)
	}
	rows, err := admin.Query(ctx, statementsTopSQL, database)
	if err != nil {
		return nil, fmt.Errorf("reading pg_stat_statements: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c StatementCalls
		if err := rows.Scan(&c.Query, &c.Calls); err != nil {
			return nil, fmt.Errorf("reading pg_stat_statements: %w", err)
		}
		s.Top = append(s.Top, c)
	}
	return &s, rows.Err()
}

// Markdown renders the rework: the counts, the deliveries per success, and the reasons.
func (r Rework) Markdown() string {
	var b strings.Builder
	b.WriteString("\nWork for the dispatch requests created while the load ran (deployments' included):\n\n")
	b.WriteString("| requests | succeeded | failed | expired | not ended | command rows | deliveries per success | SQL statements per success |\n|---|---|---|---|---|---|---|---|\n")
	perSuccess := func(n float64) string {
		if r.Succeeded == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", n/float64(r.Succeeded))
	}
	sql := "–"
	if r.Statements != nil {
		sql = perSuccess(float64(r.Statements.Calls))
	}
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %s | %s |\n", r.Requests, r.Succeeded, r.Failed, r.Expired, r.Open,
		r.Commands, perSuccess(float64(r.Commands)), sql)
	fmt.Fprintf(&b, "\nRequests by deliveries: 1: %d, 2: %d, 3: %d, 4 or more: %d.\n", r.Deliveries[0], r.Deliveries[1],
		r.Deliveries[2], r.Deliveries[3])
	writeCounts(&b, "Cancelled commands by reason", r.Cancelled)
	writeCounts(&b, "Failed and expired requests by last error", r.Failures)
	if r.Statements != nil && len(r.Statements.Top) > 0 {
		b.WriteString("\nMost frequent statements:\n\n| calls | per success | statement |\n|---|---|---|\n")
		for _, s := range r.Statements.Top {
			fmt.Fprintf(&b, "| %d | %s | `%s` |\n", s.Calls, perSuccess(float64(s.Calls)), strings.ReplaceAll(s.Query, "|", `\|`))
		}
	}
	return b.String()
}

func writeCounts(b *strings.Builder, title string, counts []Count) {
	if len(counts) == 0 {
		fmt.Fprintf(b, "\n%s: none.\n", title)
		return
	}
	fmt.Fprintf(b, "\n%s:\n\n", title)
	for _, c := range counts {
		what := c.What
		if what == "" {
			what = "(no reason recorded)"
		}
		fmt.Fprintf(b, "- %d × %s\n", c.N, what)
	}
}
