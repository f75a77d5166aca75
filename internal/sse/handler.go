package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

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
// stream that does not resume). A ": keep-alive" comment follows every KeepAlive. A
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
	h := &handler{broker: b, opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse/deployments/{id}", h.deploymentStream)
	mux.HandleFunc("GET /sse/events", h.eventStream)
	mux.HandleFunc("/sse/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

type handler struct {
	broker *Broker
	opts   HandlerOptions
}

func (h *handler) deploymentStream(w http.ResponseWriter, r *http.Request) {
	var problems []fieldProblem
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		problems = append(problems, fieldProblem{Field: "id", Problem: "must be a deployment UUID"})
	}
	f, after, more := parseStreamQuery(r, false)
	problems = append(problems, more...)
	if len(problems) > 0 {
		writeError(w, http.StatusBadRequest, "invalid_argument", "invalid event stream request", problems...)
		return
	}
	f.deploymentID = &id
	h.stream(w, r, f, after)
}

func (h *handler) eventStream(w http.ResponseWriter, r *http.Request) {
	f, after, problems := parseStreamQuery(r, true)
	if len(problems) > 0 {
		writeError(w, http.StatusBadRequest, "invalid_argument", "invalid event stream request", problems...)
		return
	}
	h.stream(w, r, f, after)
}

var (
	typePattern   = regexp.MustCompile(`^(deployment|step|target)\.([a-z_]+|\*)$`)
	targetPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// parseStreamQuery reads the filter and resume position of a stream request, with
// every problem found.
func parseStreamQuery(r *http.Request, deploymentParam bool) (filter, *int64, []fieldProblem) {
	var (
		f        filter
		after    *int64
		problems []fieldProblem
	)
	// r.URL.Query drops what it cannot decode; a filter dropped silently would widen
	// the stream, so a query that does not decode is refused.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		problems = append(problems, fieldProblem{Field: "query", Problem: "not a valid query string: " + err.Error()})
	}
	for key, values := range q {
		switch key {
		case "":
			problems = append(problems, fieldProblem{Field: "query", Problem: "a parameter without a name"})
		case "deployment":
			if !deploymentParam {
				problems = append(problems, fieldProblem{Field: key, Problem: "not allowed here: the path names the deployment"})
				continue
			}
			if len(values) != 1 {
				problems = append(problems, fieldProblem{Field: key, Problem: "give one deployment"})
				continue
			}
			id, err := uuid.Parse(values[0])
			if err != nil {
				problems = append(problems, fieldProblem{Field: key, Problem: "must be a deployment UUID"})
				continue
			}
			f.deploymentID = &id
		case "type":
			for _, t := range splitList(values) {
				if !typePattern.MatchString(t) {
					problems = append(problems, fieldProblem{Field: key,
						Problem: fmt.Sprintf("%q is not an event type or pattern such as step.finished or step.*", t)})
					continue
				}
				f.types = append(f.types, t)
			}
		case "target":
			for _, t := range splitList(values) {
				if !targetPattern.MatchString(t) {
					problems = append(problems, fieldProblem{Field: key, Problem: fmt.Sprintf("%q is not a target name", t)})
					continue
				}
				f.targets = append(f.targets, t)
			}
		case "last_event_id":
		default:
			problems = append(problems, fieldProblem{Field: key, Problem: "unknown parameter"})
		}
	}
	field, value := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if value == "" && q.Has("last_event_id") {
		field, value = "last_event_id", q.Get("last_event_id")
		if len(q["last_event_id"]) != 1 {
			problems = append(problems, fieldProblem{Field: field, Problem: "give one event id"})
		}
	}
	if value != "" || field == "last_event_id" {
		id, err := strconv.ParseInt(value, 10, 64)
		if err != nil || id < 0 {
			problems = append(problems, fieldProblem{Field: field, Problem: "must be an event id: a whole number of 0 or more"})
		} else {
			after = &id
		}
	}
	return f, after, problems
}

// splitList splits comma-separated values; an empty item is kept so that it is
// reported.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(item))
		}
	}
	return out
}

// stream serves one event stream: the replay after `after` when it is set, then live
// events until the client leaves, falls too far behind, or the broker stops.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, f filter, after *int64) {
	ctx := r.Context()
	if !h.broker.running() {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the event stream is shutting down")
		return
	}
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

	var cursor int64
	if after != nil {
		// Catch up from the log before subscribing, so that a long replay cannot
		// overflow the subscription's buffer.
		cursor = *after
		through, err := h.broker.position(ctx)
		if err != nil {
			return
		}
		if cursor, err = h.replay(ctx, out, f, cursor, through); err != nil {
			return
		}
	}
	sub, through, err := h.broker.subscribe(ctx, f)
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
	if after != nil {
		// What was published between the catch-up and the subscription.
		if cursor, err = h.replay(ctx, out, f, cursor, through); err != nil {
			return
		}
	} else {
		cursor = through
	}
	out.arm()
	if out.write(liveComment) != nil || out.flush() != nil {
		return
	}

	keepAlive := time.NewTicker(h.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-sub.ctx.Done():
			if errors.Is(context.Cause(sub.ctx), errSlowClient) {
				out.abort()
				h.opts.Logger.InfoContext(ctx, "cut off slow event stream", "remote_addr", r.RemoteAddr, "position", cursor)
			}
			return
		case fr := <-sub.ch:
			// Write what is queued already and flush once: no event waits for a flush.
			out.arm()
			for more := true; more; {
				if fr.id > cursor {
					if out.write(fr.bytes) != nil {
						return
					}
					cursor = fr.id
				}
				select {
				case fr = <-sub.ch:
				default:
					more = false
				}
			}
			if out.flush() != nil {
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

var (
	liveComment      = []byte(": live\n\n")
	keepAliveComment = []byte(": keep-alive\n\n")
)

// replay writes the events after `after` up to `through` that match f, from the log,
// and returns the position reached.
func (h *handler) replay(ctx context.Context, out *streamWriter, f filter, after, through int64) (int64, error) {
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

// streamWriter writes to one client, each batch of writes under a deadline; abort
// makes the pending and every later write fail, which closes the connection.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration

	mu   sync.Mutex
	done bool // aborted or finished: the deadline is no longer ours to move
}

func newStreamWriter(w http.ResponseWriter, timeout time.Duration) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// arm gives the writes up to the next flush their deadline.
func (s *streamWriter) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
}

func (s *streamWriter) write(b []byte) error {
	_, err := s.w.Write(b)
	return err
}

func (s *streamWriter) flush() error {
	return s.rc.Flush()
}

func (s *streamWriter) abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		_ = s.rc.SetWriteDeadline(time.Now())
	}
}

// finish clears the write deadline, unless aborted, so that it does not outlive the
// stream on a reused connection.
func (s *streamWriter) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}

// fieldProblem names one bad parameter; errorBody is the API's JSON error shape.
type fieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

type errorBody struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Fields  []fieldProblem `json:"fields,omitempty"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, message string, fields ...fieldProblem) {
	var body errorBody
	body.Error.Code, body.Error.Message, body.Error.Fields = code, message, fields
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
