package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/schema"
)

// CreatedDeployment is the answer to a create.
type CreatedDeployment struct {
	ID      string            `json:"id"`
	Status  string            `json:"status"`
	Created bool              `json:"created"`
	Links   map[string]string `json:"links"`
}

// CreateDeployment submits a spec, YAML or JSON, as it is.
func (c *Client) CreateDeployment(ctx context.Context, spec []byte) (CreatedDeployment, error) {
	var out CreatedDeployment
	err := c.DoRaw(ctx, http.MethodPost, "/api/v1/deployments", "application/yaml", spec, &out)
	return out, err
}

// Deployment returns a deployment with its steps and per-target results.
func (c *Client) Deployment(ctx context.Context, id string) (schema.DeploymentView, map[string]string, error) {
	var out struct {
		Deployment schema.DeploymentView `json:"deployment"`
		Links      map[string]string     `json:"links"`
	}
	err := c.Do(ctx, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id), nil, &out)
	return out.Deployment, out.Links, err
}

// ListDeployments lists deployments newest first.
func (c *Client) ListDeployments(ctx context.Context, statuses []string, name string, limit int) ([]schema.DeploymentView, error) {
	v := url.Values{}
	if len(statuses) > 0 {
		v.Set("status", strings.Join(statuses, ","))
	}
	if name != "" {
		v.Set("name", name)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Deployments []schema.DeploymentView `json:"deployments"`
	}
	err := c.Do(ctx, http.MethodGet, "/api/v1/deployments?"+v.Encode(), nil, &out)
	return out.Deployments, err
}

// CancelDeployment asks for a deployment to be cancelled.
func (c *Client) CancelDeployment(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, "/api/v1/deployments/"+url.PathEscape(id)+"/cancel", nil, nil)
}

// Event is one server-sent event.
type Event struct {
	ID   string
	Type string
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
		apiErr := &Error{Status: resp.StatusCode}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(raw, &apiErr.Body) != nil {
			apiErr.Body.Error.Message = strings.TrimSpace(string(raw))
		}
		return false, apiErr
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
			ev.Type = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
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
