package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/schema"
)

// A command ending wakes the dispatchers when requests wait (trigger
// command_queue_limit_room). A batch of results stored in one statement looks at the
// queue once, not once per command; the look is per transaction, so the next
// transaction looks again; and with nothing waiting nobody is woken.
func TestEndingCommandsWakesTheDispatchersOncePerTransaction(t *testing.T) {
	t.Parallel()
	b, _, cmds := setupResultBatch(t, 6)
	waiting := b.enqueue(t, req("waits", "web-1", "normal"))

	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(b.ctx, `LISTEN mantis_dispatch_requests`)
	require.NoError(t, err)
	// next returns the payload of the next notification on the channel.
	next := func() string {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(ctx)
		require.NoError(t, err)
		return n.Payload
	}
	// end stores the results of cmds in one statement of its own transaction and
	// returns how many times that transaction read the request queue.
	end := func(cmds ...schema.Command) int64 {
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(b.ctx) }()
		reads := func() int64 {
			var n int64
			require.NoError(t, tx.QueryRow(b.ctx, `SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables
				WHERE relname = 'pending_dispatch_requests'`).Scan(&n))
			return n
		}
		before := reads()
		b.storeSucceeded(t, tx, cmds...)
		read := reads() - before
		require.NoError(t, tx.Commit(b.ctx))
		return read
	}
	// marker sends a notification of its own: one sent after a transaction's commit
	// arrives after any that transaction sent.
	marker := func(payload string) {
		_, err := b.pool.Exec(b.ctx, `SELECT pg_notify('mantis_dispatch_requests', $1)`, payload)
		require.NoError(t, err)
	}

	require.EqualValues(t, 1, end(cmds[0:4]...), "four commands ended in one statement look at the queue once")
	require.Empty(t, next(), "a request waits: the dispatchers are woken")

	require.EqualValues(t, 1, end(cmds[4]), "the next transaction looks again")
	require.Empty(t, next())

	_, err = b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET status = 'cancelled' WHERE id = $1`, waiting[0].ID)
	require.NoError(t, err)
	end(cmds[5])
	marker("after")
	require.Equal(t, "after", next(), "nothing waits: nobody is woken")
}
