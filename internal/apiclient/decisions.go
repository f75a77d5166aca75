package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// Decide takes a decision (api.Decision*) in a running deployment and returns it as
// recorded.
func (c *Client) Decide(ctx context.Context, id, decision, comment string) (api.Decision, error) {
	var out api.Decision
	err := c.Do(ctx, http.MethodPost, "/api/v1/deployments/"+url.PathEscape(id)+"/decisions",
		api.DecisionRequest{Decision: decision, Comment: comment}, &out)
	return out, err
}

// Decisions lists the decisions taken in a deployment, oldest first.
func (c *Client) Decisions(ctx context.Context, id string) ([]api.Decision, error) {
	var out api.DecisionList
	err := c.Do(ctx, http.MethodGet, "/api/v1/deployments/"+url.PathEscape(id)+"/decisions", nil, &out)
	return out.Data, err
}
