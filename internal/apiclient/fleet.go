package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/mantis-deploy/mantis/internal/api"
)

// PlanDeployment asks what a spec would do if created now (dry_run=true); nothing
// is written or started.
func (c *Client) PlanDeployment(ctx context.Context, spec []byte) (api.DeploymentPlan, error) {
	var out api.DeploymentPlan
	err := c.DoRaw(ctx, http.MethodPost, "/api/v1/deployments?"+api.QueryDryRun+"=true", "application/yaml", spec, &out)
	return out, err
}

// CreateDeploymentOverridingFreeze submits a spec as CreateDeployment does, past any
// active freeze (an admin token is needed; the override is recorded).
func (c *Client) CreateDeploymentOverridingFreeze(ctx context.Context, spec []byte) (api.CreatedDeployment, error) {
	var out api.CreatedDeployment
	err := c.DoRaw(ctx, http.MethodPost, "/api/v1/deployments?"+api.QueryOverrideFreeze+"=true", "application/yaml", spec, &out)
	return out, err
}

// ListFreezes returns the freeze windows.
func (c *Client) ListFreezes(ctx context.Context) ([]api.Freeze, error) {
	var out api.FreezeList
	err := c.Do(ctx, http.MethodGet, "/api/v1/freezes", nil, &out)
	return out.Freezes, err
}

// CreateFreeze creates a freeze window.
func (c *Client) CreateFreeze(ctx context.Context, f api.NewFreeze) (api.Freeze, error) {
	var out api.Freeze
	err := c.Do(ctx, http.MethodPost, "/api/v1/freezes", f, &out)
	return out, err
}

// DeleteFreeze deletes a freeze window.
func (c *Client) DeleteFreeze(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/freezes/"+url.PathEscape(name), nil, nil)
}

// ListWebhooks returns the webhooks.
func (c *Client) ListWebhooks(ctx context.Context) ([]api.Webhook, error) {
	var out api.WebhookList
	err := c.Do(ctx, http.MethodGet, "/api/v1/webhooks", nil, &out)
	return out.Webhooks, err
}

// CreateWebhook registers a webhook.
func (c *Client) CreateWebhook(ctx context.Context, w api.NewWebhook) (api.Webhook, error) {
	var out api.Webhook
	err := c.Do(ctx, http.MethodPost, "/api/v1/webhooks", w, &out)
	return out, err
}

// DeleteWebhook deletes a webhook.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/webhooks/"+url.PathEscape(id), nil, nil)
}

// WebhookFailures returns a webhook's deliveries whose attempts are spent.
func (c *Client) WebhookFailures(ctx context.Context, id string) ([]api.WebhookDelivery, error) {
	var out api.WebhookDeliveryList
	err := c.Do(ctx, http.MethodGet, "/api/v1/webhooks/"+url.PathEscape(id)+"/failures", nil, &out)
	return out.Deliveries, err
}

// ListSchedules returns the deployment schedules.
func (c *Client) ListSchedules(ctx context.Context) ([]api.Schedule, error) {
	var out api.ScheduleList
	err := c.Do(ctx, http.MethodGet, "/api/v1/schedules", nil, &out)
	return out.Schedules, err
}

// CreateSchedule creates a deployment schedule.
func (c *Client) CreateSchedule(ctx context.Context, s api.NewSchedule) (api.Schedule, error) {
	var out api.Schedule
	err := c.Do(ctx, http.MethodPost, "/api/v1/schedules", s, &out)
	return out, err
}

// DeleteSchedule deletes a deployment schedule.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/api/v1/schedules/"+url.PathEscape(name), nil, nil)
}
