// Package apiclient is a Go client for Mandible's HTTP API, used by mantisctl.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// Client calls one Mandible's API with a bearer token.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// New returns a client for baseURL (e.g. http://127.0.0.1:8080).
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Error is an error answer of the API. Status and Code are stable for callers that
// map answers to outcomes (exit codes, retries): Status is the HTTP status and Code
// the problem's code (api.CodeNotFound, ...), empty when the answer was not a
// problem detail (a proxy's error page, say). Problem is the whole answer.
type Error struct {
	Status  int
	Code    api.ErrorCode
	Problem api.Problem
	// Body is the answer in its shape before problem details.
	//
	// Deprecated: read Code and Problem.
	Body api.ErrorBody
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (HTTP %d)", e.Problem.Detail, e.Status)
	for _, f := range e.Problem.Fields {
		fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Problem)
	}
	return b.String()
}

// errorOf reads the error answer resp, of at most limit bytes: an
// application/problem+json api.Problem, or an answer in the older {"error": ...}
// shape; anything else becomes the detail as it is.
func errorOf(resp *http.Response, limit int64) *Error {
	apiErr := &Error{Status: resp.StatusCode}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	var p api.Problem
	if json.Unmarshal(raw, &p) != nil {
		p = api.Problem{}
	}
	if p.Code == "" { // an answer of a Mandible that predates problem details
		p.Code, p.Detail, p.Fields = p.Error.Code, p.Error.Message, p.Error.Fields
	}
	if p.Detail == "" {
		p.Detail = strings.TrimSpace(string(raw))
	}
	p.Status = resp.StatusCode
	apiErr.Code, apiErr.Problem = p.Code, p
	apiErr.Body = api.ErrorBody{Error: api.ErrorDetail{Code: p.Code, Message: p.Detail, Fields: p.Fields}}
	return apiErr
}

// Do sends a JSON request and decodes a JSON answer into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	return c.DoRaw(ctx, method, path, "application/json", body, out)
}

// DoRaw sends body as it is, with its content type, and decodes a JSON answer into out.
func (c *Client) DoRaw(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("calling Mandible at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return errorOf(resp, 1<<20)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding answer of %s %s: %w", method, path, err)
	}
	return nil
}

// DispatchRequestQuery filters ListDispatchRequests.
type DispatchRequestQuery struct {
	Statuses   []string
	Target     string
	Deployment string
	Limit      int
}

// ListDispatchRequests returns requests newest first with the reason for their state.
func (c *Client) ListDispatchRequests(ctx context.Context, q DispatchRequestQuery) ([]api.DispatchRequest, error) {
	v := url.Values{}
	if len(q.Statuses) > 0 {
		v.Set("status", strings.Join(q.Statuses, ","))
	}
	if q.Target != "" {
		v.Set("target", q.Target)
	}
	if q.Deployment != "" {
		v.Set("deployment", q.Deployment)
	}
	if q.Limit > 0 {
		v.Set("limit", fmt.Sprint(q.Limit))
	}
	var out api.DispatchRequestList
	err := c.Do(ctx, http.MethodGet, "/api/v1/dispatch-requests?"+v.Encode(), nil, &out)
	return out.Requests, err
}

// DispatchRequest returns one dispatch request with the reason for its state.
func (c *Client) DispatchRequest(ctx context.Context, id string) (api.DispatchRequest, error) {
	var out api.DispatchRequest
	err := c.Do(ctx, http.MethodGet, "/api/v1/dispatch-requests/"+url.PathEscape(id), nil, &out)
	return out, err
}

// EnqueueDispatchRequests enqueues commands for targets, each idempotent by its
// idempotency_key, and returns the stored requests in order (created false for a
// key that already named one).
func (c *Client) EnqueueDispatchRequests(ctx context.Context, reqs []api.NewDispatchRequest) ([]api.EnqueuedRequest, error) {
	var out api.EnqueueAnswer
	err := c.Do(ctx, http.MethodPost, "/api/v1/dispatch-requests", api.EnqueueBody{Requests: reqs}, &out)
	return out.Requests, err
}
