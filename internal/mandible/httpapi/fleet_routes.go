package httpapi

import "github.com/mantis-deploy/mantis/internal/mandible/apitoken"

// fleetRoutes are the routes of freeze windows, webhooks and schedules: freezes and
// schedules are read with read; webhooks, their failed deliveries included, are
// read only with admin (their URLs may name private hosts); every write needs admin. Schedules live in Temporal, so they are served only with a
// Temporal client.
func (s *server) fleetRoutes() []apiRoute {
	routes := []apiRoute{
		{"GET /api/v1/freezes", apitoken.ScopeRead, s.listFreezes},
		{"GET /api/v1/freezes/{name}", apitoken.ScopeRead, s.getFreeze},
		{"POST /api/v1/freezes", apitoken.ScopeAdmin, s.createFreeze},
		{"DELETE /api/v1/freezes/{name}", apitoken.ScopeAdmin, s.deleteFreeze},
		{"GET /api/v1/webhooks", apitoken.ScopeAdmin, s.listWebhooks},
		{"GET /api/v1/webhooks/{id}", apitoken.ScopeAdmin, s.getWebhook},
		{"POST /api/v1/webhooks", apitoken.ScopeAdmin, s.createWebhook},
		{"DELETE /api/v1/webhooks/{id}", apitoken.ScopeAdmin, s.deleteWebhook},
		{"GET /api/v1/webhooks/{id}/failures", apitoken.ScopeAdmin, s.listWebhookFailures},
	}
	if s.temporal != nil {
		routes = append(routes,
			apiRoute{"GET /api/v1/schedules", apitoken.ScopeRead, s.listSchedules},
			apiRoute{"GET /api/v1/schedules/{name}", apitoken.ScopeRead, s.getSchedule},
			apiRoute{"POST /api/v1/schedules", apitoken.ScopeAdmin, s.createSchedule},
			apiRoute{"DELETE /api/v1/schedules/{name}", apitoken.ScopeAdmin, s.deleteSchedule})
	}
	return routes
}
