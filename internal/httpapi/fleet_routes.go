package httpapi

import "github.com/mantis-deploy/mantis/internal/apitoken"

// fleetRoutes are the routes of freeze windows, webhooks and schedules: reads need
// read, writes admin. Schedules live in Temporal, so they are served only with a
// Temporal client.
func (s *server) fleetRoutes() []apiRoute {
	routes := []apiRoute{
		{"GET /api/v1/freezes", apitoken.ScopeRead, s.listFreezes},
		{"POST /api/v1/freezes", apitoken.ScopeAdmin, s.createFreeze},
		{"DELETE /api/v1/freezes/{name}", apitoken.ScopeAdmin, s.deleteFreeze},
	}
	return routes
}
