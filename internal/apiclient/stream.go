package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// Event is one server-sent event.
type Event struct {
	ID   string
	Type events.Type
	// Data is the event's data (one of the events package's payloads) with
	// deployment_id and created_at added.
	Data json.RawMessage
}

// StreamEvents follows path (an /sse/... URL path) and calls fn for each event until
// fn returns false, ctx ends, or the stream fails for good. A dropped stream is resumed
// with Last-Event-ID, so fn sees every event once, in order.
func (c *Client) StreamEvents(ctx context.Context, path string, fn func(Event) bool) error {
	lastID := ""
	backoff := 200 * time.Millisecond
	for {
		done, err := c.streamOnce(ctx, path, &lastID, fn)
		if done || ctx.Err() != nil {
			return err
		}
		if apiErr, ok := err.(*Error); ok && apiErr.Status < 500 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (c *Client) streamOnce(ctx context.Context, path string, lastID *string, fn func(Event) bool) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return true, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	stream := &http.Client{Transport: c.HTTP.Transport} // no overall timeout on a stream
	resp, err := stream.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, errorOf(resp, 1<<16)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev Event
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() > 0 || ev.Type != "" {
				ev.Data = append(json.RawMessage(nil), data.Bytes()...)
				if ev.ID != "" {
					*lastID = ev.ID
				}
				if !fn(ev) {
					return true, nil
				}
			}
			ev, data = Event{}, bytes.Buffer{}
		case strings.HasPrefix(line, ":"):
			// comment (keep-alive)
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			ev.Type = events.Type(strings.TrimSpace(strings.TrimPrefix(line, "event:")))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("reading event stream: %w", err)
	}
	return false, fmt.Errorf("event stream ended")
}
