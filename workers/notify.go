package workers

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// drainNotifications consumes notifications already delivered to conn without waiting
// for new ones.
func drainNotifications(ctx context.Context, conn *pgx.Conn) {
	for {
		short, cancel := context.WithTimeout(ctx, time.Millisecond)
		_, err := conn.WaitForNotification(short)
		cancel()
		if err != nil {
			return
		}
	}
}
