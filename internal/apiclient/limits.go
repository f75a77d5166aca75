package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/mantis-deploy/mantis/internal/api"
)

// ListLimits returns the concurrency limits by name.
func (c *Client) ListLimits(ctx context.Context) ([]api.Limit, error) {
	var out api.LimitList
	err := c.Do(ctx, http.MethodGet, "/api/v1/limits", nil, &out)
	return out.Limits, err
}

// Limit returns one concurrency limit.
func (c *Client) Limit(ctx context.Context, name string) (api.Limit, error) {
	var out api.Limit
	err := c.Do(ctx, http.MethodGet, "/api/v1/limits/"+url.PathEscape(name), nil, &out)
	return out, err
}

// SetLimit stores a concurrency limit under its name and returns it as stored.
func (c *Client) SetLimit(ctx context.Context, l api.Limit) (api.Limit, error) {
	var out api.Limit
	err := c.Do(ctx, http.MethodPost, "/api/v1/limits", l, &out)
	return out, err
}

// DeleteLimit removes a concurrency limit.
func (c *Client) DeleteLimit(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/limits/"+url.PathEscape(name), nil, nil)
}

// DispatchRequest returns one dispatch request with the reason for its state.
func (c *Client) DispatchRequest(ctx context.Context, id string) (api.DispatchRequest, error) {
	var out api.DispatchRequest
	err := c.Do(ctx, http.MethodGet, "/api/v1/dispatch-requests/"+url.PathEscape(id), nil, &out)
	return out, err
}
