package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// CreateDeployment submits a spec, YAML or JSON, as it is.
func (c *Client) CreateDeployment(ctx context.Context, spec []byte) (api.CreatedDeployment, error) {
	var out api.CreatedDeployment
	err := c.DoRaw(ctx, http.MethodPost, "/api/v1/deployments", "application/yaml", spec, &out)
	return out, err
}

// Deployment returns a deployment with its steps and per-target results.
func (c *Client) Deployment(ctx context.Context, id string) (api.Deployment, api.Links, error) {
	var out api.DeploymentAnswer
	err := c.Do(ctx, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id), nil, &out)
	return out.Deployment, out.Links, err
}

// ListDeployments lists deployments newest first.
func (c *Client) ListDeployments(ctx context.Context, statuses []string, name string, limit int) ([]api.Deployment, error) {
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
	var out api.DeploymentList
	err := c.Do(ctx, http.MethodGet, "/api/v1/deployments?"+v.Encode(), nil, &out)
	return out.Deployments, err
}

// CancelDeployment asks for a deployment to be cancelled.
func (c *Client) CancelDeployment(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, "/api/v1/deployments/"+url.PathEscape(id)+"/cancel", nil, nil)
}

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
