package scale

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/backoff"
)

// ConnClass is whose PostgreSQL sessions a count is.
type ConnClass string

// The classes of sessions: Mandible's (the mantis role, application_name
// "mandible ..."), the production Temporal server's (its own temporal role), and the
// rest (the harness, PostgreSQL's own workers).
const (
	ConnMantis   ConnClass = "mantis"
	ConnTemporal ConnClass = "temporal"
	ConnOther    ConnClass = "other"
)

// TemporalRole is the role the production Temporal server logs in as (devstack).
const TemporalRole = "temporal"

// connsSQL counts the client sessions on every database by role and application.
const connsSQL = `SELECT coalesce(usename, ''), coalesce(application_name, ''), count(*)
	FROM pg_stat_activity WHERE backend_type = 'client backend' GROUP BY 1, 2`

// Classify says whose a session of role user and application app is; mandiblePrefix
// starts every replica's application_name.
func Classify(user, app, mandiblePrefix string) ConnClass {
	switch {
	case user == TemporalRole:
		return ConnTemporal
	case strings.HasPrefix(app, mandiblePrefix):
		return ConnMantis
	default:
		return ConnOther
	}
}

// ConnPeaks samples pg_stat_activity through an administrator's connection and
// keeps each class's peak.
type ConnPeaks struct {
	conn   *pgx.Conn
	prefix string

	mu    sync.Mutex
	peaks map[ConnClass]int
	err   error
}

// NewConnPeaks samples through conn (a superuser's, which sees every session's
// role); mandiblePrefix starts every replica's application_name.
func NewConnPeaks(conn *pgx.Conn, mandiblePrefix string) *ConnPeaks {
	return &ConnPeaks{conn: conn, prefix: mandiblePrefix, peaks: map[ConnClass]int{}}
}

// Run samples every interval until ctx ends.
func (p *ConnPeaks) Run(ctx context.Context, every time.Duration) {
	backoff.Tick(ctx, every, p.SampleOnce)
}

// SampleOnce counts the sessions once and raises the peaks.
func (p *ConnPeaks) SampleOnce(ctx context.Context) {
	counts, err := p.count(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			p.err = err
		}
		return
	}
	for class, n := range counts {
		p.peaks[class] = max(p.peaks[class], n)
	}
}

func (p *ConnPeaks) count(ctx context.Context) (map[ConnClass]int, error) {
	rows, err := p.conn.Query(ctx, connsSQL)
	if err != nil {
		return nil, fmt.Errorf("counting database sessions: %w", err)
	}
	defer rows.Close()
	out := map[ConnClass]int{}
	for rows.Next() {
		var user, app string
		var n int
		if err := rows.Scan(&user, &app, &n); err != nil {
			return nil, fmt.Errorf("counting database sessions: %w", err)
		}
		out[Classify(user, app, p.prefix)] += n
	}
	return out, rows.Err()
}

// Peaks returns each class's peak so far, and the last sampling error if any.
func (p *ConnPeaks) Peaks() (map[ConnClass]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[ConnClass]int, len(p.peaks))
	for k, v := range p.peaks {
		out[k] = v
	}
	return out, p.err
}
