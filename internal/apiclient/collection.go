package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// Collection is one of the API's named collections of T, whose items are created (or,
// for limits, set) from an N and named in their paths by name or ID. Its calls take
// the client first, as the method expressions of Client's own calls do, so that a
// command builder takes either: apiclient.Freezes.List or (*apiclient.Client).Deployment.
type Collection[T, N any] struct {
	path string
	// list fetches the collection and unwraps its items from the list's answer.
	list func(c *Client, ctx context.Context) ([]T, error)
}

// The API's named collections.
var (
	Targets = Collection[api.Target, api.NewTarget]{path: "/api/v1/targets", list: func(c *Client, ctx context.Context) ([]api.Target, error) {
		return c.ListTargets(ctx, TargetQuery{}) // every target, page after page
	}}
	Limits    = collection[api.Limit, api.Limit]("/api/v1/limits", func(l api.LimitList) []api.Limit { return l.Limits })
	Freezes   = collection[api.Freeze, api.NewFreeze]("/api/v1/freezes", func(l api.FreezeList) []api.Freeze { return l.Freezes })
	Webhooks  = collection[api.Webhook, api.NewWebhook]("/api/v1/webhooks", func(l api.WebhookList) []api.Webhook { return l.Webhooks })
	Schedules = collection[api.Schedule, api.NewSchedule]("/api/v1/schedules", func(l api.ScheduleList) []api.Schedule { return l.Schedules })
)

// collection is the Collection at path whose list answer is an L holding its items.
func collection[T, N, L any](path string, items func(L) []T) Collection[T, N] {
	return Collection[T, N]{path: path, list: func(c *Client, ctx context.Context) ([]T, error) {
		var out L
		err := c.Do(ctx, http.MethodGet, path, nil, &out)
		return items(out), err
	}}
}

// List returns the collection's items.
func (k Collection[T, N]) List(c *Client, ctx context.Context) ([]T, error) { return k.list(c, ctx) }

// Get returns the item named name.
func (k Collection[T, N]) Get(c *Client, ctx context.Context, name string) (T, error) {
	var out T
	err := c.Do(ctx, http.MethodGet, k.item(name), nil, &out)
	return out, err
}

// Create posts an item to the collection and returns it as stored. For targets and
// limits the item replaces one of the same name.
func (k Collection[T, N]) Create(c *Client, ctx context.Context, item N) (T, error) {
	var out T
	err := c.Do(ctx, http.MethodPost, k.path, item, &out)
	return out, err
}

// Delete deletes the item named name (for targets: deregisters it).
func (k Collection[T, N]) Delete(c *Client, ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, k.item(name), nil, nil)
}

// item is the path of the item named name.
func (k Collection[T, N]) item(name string) string { return k.path + "/" + url.PathEscape(name) }

// WebhookFailures returns a webhook's deliveries whose attempts are spent.
func (c *Client) WebhookFailures(ctx context.Context, id string) ([]api.WebhookDelivery, error) {
	var out api.WebhookDeliveryList
	err := c.Do(ctx, http.MethodGet, "/api/v1/webhooks/"+url.PathEscape(id)+"/failures", nil, &out)
	return out.Deliveries, err
}
