package sse

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/schema"
)

// HandlerOptions configures the handler. Zero fields take the defaults shown.
type HandlerOptions struct {
	Logger *slog.Logger
	// KeepAlive is how often a ": keep-alive" comment is sent (15 s).
	KeepAlive time.Duration
	// WriteTimeout bounds each write to a client that stopped reading (30 s).
	WriteTimeout time.Duration
	// ReplayPage is how many events a replay reads from the log at once (500).
	ReplayPage int
	// MaxReplay bounds a replay, in event ids (50000): a stream resuming further
	// back than that gets a reset event first.
	MaxReplay int64
}

// NewHandler returns the handler of the event streams, fed by b:
//
//	GET /sse/deployments/{id}  the events of one deployment
//	GET /sse/events            every event, or those chosen by ?deployment=<uuid>,
//	                           ?type=deployment.*,step.finished and ?target=<name>[,<name>]
//
// Each event is sent as "id: <log id>", "event: <type>" and "data: <json>", the JSON
// being the event's data with deployment_id and created_at added. A stream resumes
// after the Last-Event-ID header (or ?last_event_id=) by replaying the log and then
// going live; a ": live" comment marks the switch (it is also the first line of a
// stream that does not resume). A stream resuming from before the oldest event
// retention kept, or more than MaxReplay events back, gets a "reset" event first
// (events.Reset): the client must reload. A ": keep-alive" comment follows every KeepAlive. A
// stream more than the broker's SubscriberBuffer events behind is closed; the client
// resumes with Last-Event-ID. Bad parameters are answered 400 with a JSON error naming
// them. The handler checks no credentials: mount it behind the API's token check.
func NewHandler(b *Broker, opts HandlerOptions) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	if opts.ReplayPage <= 0 {
		opts.ReplayPage = 500
	}
	if opts.MaxReplay <= 0 {
		opts.MaxReplay = 50000
	}
	h := &handler{broker: b, opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse/deployments/{id}", h.deploymentStream)
	mux.HandleFunc("GET /sse/events", h.eventStream)
	mux.HandleFunc(catchAll, func(w http.ResponseWriter, r *http.Request) {
		api.WriteNotFoundOrMethod(w, r, mux, catchAll)
	})
	return mux
}

// catchAll answers the paths under /sse/ no stream serves: 405 for a stream asked
// with another method than GET, 404 otherwise.
const catchAll = "/sse/"

type handler struct {
	broker *Broker
	opts   HandlerOptions
}

func (h *handler) deploymentStream(w http.ResponseWriter, r *http.Request) {
	var problems []api.FieldProblem
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		problems = append(problems, api.FieldProblem{Field: "id", Problem: "must be a deployment UUID"})
	}
	f, after, more := parseStreamQuery(r, false)
	problems = append(problems, more...)
	if len(problems) > 0 {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "invalid event stream request", problems...)
		return
	}
	f.deploymentID = &id
	h.stream(w, r, f, after)
}

func (h *handler) eventStream(w http.ResponseWriter, r *http.Request) {
	f, after, problems := parseStreamQuery(r, true)
	if len(problems) > 0 {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "invalid event stream request", problems...)
		return
	}
	h.stream(w, r, f, after)
}

// stream serves one event stream: the replay after `after` when it is set, then live
// events until the client leaves, falls too far behind, or the broker stops.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, f filter, after *int64) {
	if !h.broker.running() {
		api.WriteError(w, r, http.StatusServiceUnavailable, api.CodeUnavailable, "the event stream is shutting down")
		return
	}
	// The request is read, and the stream may live for hours: the server's read
	// timeout is lifted for it, as its write timeout is by each write's own deadline.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := newStreamWriter(w, h.opts.WriteTimeout)
	defer out.finish()
	out.arm()
	if out.flush() != nil {
		return
	}
	sub, cursor, err := h.catchUp(r.Context(), out, f, after)
	if err != nil {
		return
	}
	defer h.broker.unsubscribe(sub)
	// A stream cut off while blocked writing to a client that stopped reading is
	// unblocked by closing its connection.
	stop := context.AfterFunc(sub.ctx, func() {
		if errors.Is(context.Cause(sub.ctx), errSlowClient) {
			out.abort()
		}
	})
	defer stop()
	out.arm()
	if out.write(liveComment) != nil || out.flush() != nil {
		return
	}
	h.live(r, out, sub, cursor)
}

// catchUp subscribes f to the broker and, when the stream resumes after an event,
// first writes what the log holds after it. It returns the subscription and the
// position the stream has reached.
func (h *handler) catchUp(ctx context.Context, out *streamWriter, f filter, after *int64) (*subscriber, int64, error) {
	var cursor int64
	if after != nil {
		// Catch up from the log before subscribing, so that a long replay cannot
		// overflow the subscription's buffer.
		cursor = *after
		var err error
		if cursor, err = h.resetIfPruned(ctx, out, cursor); err != nil {
			return nil, 0, err
		}
		through, err := h.broker.position(ctx)
		if err != nil {
			return nil, 0, err
		}
		if cursor, err = h.replay(ctx, out, f, cursor, through); err != nil {
			return nil, 0, err
		}
	}
	sub, through, err := h.broker.subscribe(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	if after == nil {
		return sub, through, nil
	}
	// What was published between the catch-up and the subscription.
	if cursor, err = h.replay(ctx, out, f, cursor, through); err != nil {
		h.broker.unsubscribe(sub)
		return nil, 0, err
	}
	return sub, cursor, nil
}

// live writes the subscription's events after cursor, and keep-alive comments while
// there are none, until the client leaves or the subscription ends.
func (h *handler) live(r *http.Request, out *streamWriter, sub *subscriber, cursor int64) {
	keepAlive := time.NewTicker(h.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-sub.ctx.Done():
			if errors.Is(context.Cause(sub.ctx), errSlowClient) {
				out.abort()
				h.opts.Logger.InfoContext(r.Context(), "cut off slow event stream", "remote_addr", r.RemoteAddr, "position", cursor)
			}
			return
		case fr := <-sub.ch:
			var err error
			if cursor, err = writeQueued(out, sub, fr, cursor); err != nil {
				return
			}
		case <-keepAlive.C:
			out.arm()
			if out.write(keepAliveComment) != nil || out.flush() != nil {
				return
			}
		}
	}
}

// writeQueued writes fr and what is queued behind it already, then flushes once: no
// event waits for a flush. Frames at or before cursor were replayed already.
func writeQueued(out *streamWriter, sub *subscriber, fr *frame, cursor int64) (int64, error) {
	out.arm()
	for more := true; more; {
		if fr.id > cursor {
			if err := out.write(fr.bytes); err != nil {
				return cursor, err
			}
			cursor = fr.id
		}
		select {
		case fr = <-sub.ch:
		default:
			more = false
		}
	}
	return cursor, out.flush()
}

var (
	liveComment      = []byte(": live\n\n")
	keepAliveComment = []byte(": keep-alive\n\n")
)

// replay writes the events after `after` up to `through` that match f, from the log,
// and returns the position reached. A stream of the whole log reads at most MaxReplay
// ids of it: from further back it writes a reset event first and goes on from there.
// A deployment's stream reads that deployment's events alone (by its index), however
// far back: a client following a deployment that ended long ago gets its end.
func (h *handler) replay(ctx context.Context, out *streamWriter, f filter, after, through int64) (int64, error) {
	if f.deploymentID == nil {
		var err error
		if after, err = h.resetIfTooFarBack(out, after, through); err != nil {
			return after, err
		}
	}
	for after < through {
		events, err := schema.ReadEvents(ctx, h.broker.opts.DB, after, through, f.schemaFilter(), h.opts.ReplayPage)
		if err != nil {
			if ctx.Err() == nil {
				h.opts.Logger.WarnContext(ctx, "replaying the event log failed", "after", after, "err", err)
			}
			return after, err
		}
		out.arm()
		for _, e := range events {
			if err := out.write(newFrame(e).bytes); err != nil {
				return after, err
			}
		}
		if err := out.flush(); err != nil {
			return after, err
		}
		if len(events) < h.opts.ReplayPage {
			return through, nil
		}
		after = events[len(events)-1].ID
	}
	return after, nil
}
