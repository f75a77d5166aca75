package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// ResumeDeployment creates a new deployment that resumes deployment id, which failed
// or was cancelled, from a step on (see api.ResumeRequest).
func (c *Client) ResumeDeployment(ctx context.Context, id string, req api.ResumeRequest) (api.ResumedDeployment, error) {
	var out api.ResumedDeployment
	err := c.Do(ctx, http.MethodPost, "/api/v1/deployments/"+url.PathEscape(id)+"/resume", req, &out)
	return out, err
}

// RerunDeployment creates a new deployment from the stored spec of deployment id,
// which has ended.
func (c *Client) RerunDeployment(ctx context.Context, id string) (api.ResumedDeployment, error) {
	var out api.ResumedDeployment
	err := c.Do(ctx, http.MethodPost, "/api/v1/deployments/"+url.PathEscape(id)+"/rerun", nil, &out)
	return out, err
}
