// Package pgnotify shares one PostgreSQL LISTEN connection among many waiters: a
// waiter subscribes to a channel and key (the notification payload) and is woken when
// a matching notification arrives. Wake-ups coalesce; waiters re-read the database.
package pgnotify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/schema"
)

// Hub fans notifications of some channels out to subscribers.
type Hub struct {
	pool     *pgxpool.Pool
	channels []schema.Channel
	logger   *slog.Logger

	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{} // by channel + "\x00" + payload
}

// Subscription is one waiter's wake-up channel.
type Subscription struct {
	// C receives a value whenever a matching notification arrives (coalesced).
	C   chan struct{}
	key string
	hub *Hub
}

// NewHub returns a hub for channels; Run must be running for it to deliver.
func NewHub(pool *pgxpool.Pool, logger *slog.Logger, channels ...schema.Channel) *Hub {
	return &Hub{pool: pool, channels: channels, logger: logger, subs: map[string]map[*Subscription]struct{}{}}
}

// Subscribe wakes the subscription on notifications of channel with this payload.
// Close it when done.
func (h *Hub) Subscribe(channel schema.Channel, payload string) *Subscription {
	s := &Subscription{C: make(chan struct{}, 1), key: string(channel) + "\x00" + payload, hub: h}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s.key] == nil {
		h.subs[s.key] = map[*Subscription]struct{}{}
	}
	h.subs[s.key][s] = struct{}{}
	return s
}

// Close removes the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	delete(s.hub.subs[s.key], s)
	if len(s.hub.subs[s.key]) == 0 {
		delete(s.hub.subs, s.key)
	}
}

func (h *Hub) deliver(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[channel+"\x00"+payload] {
		select {
		case s.C <- struct{}{}:
		default: // already pending: coalesced
		}
	}
}

// wakeAll wakes every subscriber, after a reconnect when notifications may have been
// missed.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		for s := range subs {
			select {
			case s.C <- struct{}{}:
			default:
			}
		}
	}
}

// Run listens until ctx ends, reconnecting when the connection drops.
func (h *Hub) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return nil
		}
		h.logger.WarnContext(ctx, "notification listener lost its connection, reconnecting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

func (h *Hub) listen(ctx context.Context) error {
	pooled, err := h.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries LISTEN state: never hand it back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range h.channels {
		if err := schema.Listen(ctx, conn, ch); err != nil {
			return err
		}
	}
	h.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.deliver(n.Channel, n.Payload)
	}
}
