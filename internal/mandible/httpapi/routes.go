// Package httpapi is Mandible's HTTP surface: the JSON API under /api/v1, the SSE
// streams under /sse, health probes and Prometheus metrics.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/internal/telemetry"
	"github.com/mantis-deploy/mantis/workflows"
)

// Check reports whether one dependency is reachable; nil means ready.
type Check func(ctx context.Context) error

// Options wires the server to what it serves and reports on.
type Options struct {
	Logger *slog.Logger
	// Checks are run by /readyz, by name (database, temporal, broker, ...).
	Checks   map[string]Check
	Registry *prometheus.Registry
	DB       *pgxpool.Pool
	// Keyring holds the bearer tokens /api/v1 and /sse accept, each with its scope.
	Keyring *apitoken.Keyring
	// Tokens are the deprecated flat list of tokens, each accepted as admin; used
	// only when Keyring is nil.
	Tokens []string
	// MaxBodyBytes caps request bodies (default 1 MiB).
	MaxBodyBytes int64
	// HeartbeatTimeout decides which Thorax instances count as live.
	HeartbeatTimeout time.Duration
	// Events serves the event streams under /sse/ (sse.NewHandler); nil leaves them out.
	Events http.Handler
	// Streams caps the event streams open at once, in all and per caller.
	Streams StreamLimits
	// DLQ serves /api/v1/dlq (list, requeue, purge); nil when Mandible runs
	// without a broker, and those routes then answer 503.
	DLQ DLQ
	// Temporal starts and cancels deployment workflows.
	Temporal  client.Client
	Namespace string
	// TemporalUIURL, when set, adds Web UI links to deployment answers.
	TemporalUIURL string
	// DeploymentQueue is the task queue deployments start on.
	DeploymentQueue string
	// Secrets seals the env_secret values of deployment specs (the codec keyring);
	// nil refuses specs that have any.
	Secrets secretenv.Keyring
	// Sessions, when set, makes /api/v1 and /sse accept the console's session cookie
	// as well as a bearer token (state-changing calls then need its CSRF token).
	Sessions *Sessions
	// AuthLimiter refuses bearer tokens from an address that presented too many
	// unknown ones lately; share one with the codec endpoint and the console (a
	// limiter of its own when nil).
	AuthLimiter *AuthLimiter
}

type server struct {
	db               *pgxpool.Pool
	logger           *slog.Logger
	maxBody          int64
	heartbeatTimeout time.Duration
	temporal         client.Client
	namespace        string
	temporalUI       string
	deploymentQueue  string
	secrets          secretenv.Keyring
}

// New returns Mandible's HTTP handler: /healthz, /readyz and /metrics open, /api/v1
// behind a bearer token.
func New(opts Options) http.Handler {
	s := &server{db: opts.DB, logger: opts.Logger, maxBody: opts.MaxBodyBytes, heartbeatTimeout: opts.HeartbeatTimeout,
		temporal: opts.Temporal, namespace: opts.Namespace, temporalUI: opts.TemporalUIURL, deploymentQueue: opts.DeploymentQueue,
		secrets: opts.Secrets}
	if s.deploymentQueue == "" {
		s.deploymentQueue = workflows.DefaultDeploymentTaskQueue
	}
	if s.maxBody <= 0 {
		s.maxBody = 1 << 20
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthHandler)
	mux.HandleFunc("GET "+metricsserver.VersionPath, metricsserver.ServeVersion)
	mux.HandleFunc("GET /readyz", newReadiness(opts.Checks).handler)
	if opts.Registry != nil {
		// A gauge read at scrape time that fails (the broker or the database
		// away) leaves out its own series, not the whole scrape.
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{
			Registry: opts.Registry, ErrorHandling: promhttp.ContinueOnError}))
	}

	keys := opts.Keyring
	if keys == nil {
		keys = apitoken.NewKeyring(apitoken.Legacy(opts.Tokens))
	}
	var reg prometheus.Registerer
	if opts.Registry != nil {
		reg = opts.Registry
	}
	g := newGate(keys, s.logger, reg)
	g.sessions = opts.Sessions
	if opts.AuthLimiter != nil {
		g.limiter = opts.AuthLimiter
	}
	apiMux := http.NewServeMux()
	s.routeAPI(apiMux, g, opts.DLQ)
	routeContract(apiMux)
	apiMux.HandleFunc(apiCatchAll, func(w http.ResponseWriter, r *http.Request) {
		api.WriteNotFoundOrMethod(w, r, apiMux, apiCatchAll)
	})
	mux.Handle(apiCatchAll, apiMux)
	if opts.Events != nil {
		streams := newStreamGate(opts.Streams, s.logger, g.refusals)
		mux.Handle("/sse/", g.authenticate(g.needs(apitoken.ScopeRead, noteActor(streams.wrap(opts.Events)))))
	}
	return newInstrument(s.logger, reg).wrap(mux)
}

// apiCatchAll is the pattern that answers the API's paths no route serves: 405
// when the path is routed for another method, 404 otherwise.
const apiCatchAll = "/api/"

// apiRoute is one route under /api/v1: its pattern and the scope its token needs.
type apiRoute struct {
	pattern string
	scope   apitoken.Scope
	handler http.HandlerFunc
}

// routeAPI serves /api/v1 on mux, each route behind a bearer token and the scope
// it needs. A wrong method on a routed path is 405 whatever the token (the
// catch-all), so the token is checked per route.
func (s *server) routeAPI(mux *http.ServeMux, g *gate, dlq DLQ) {
	for _, rt := range s.apiRoutes(dlq) {
		mux.Handle(rt.pattern, telemetry.NameRoute(rt.pattern, g.authenticate(g.needs(rt.scope, noteActor(rt.handler)))))
	}
}

// apiRoutes is the route table of /api/v1, each route with the scope it needs
// (apitoken.ScopeHelp says the same in words): reads need read, but for the DLQ's
// and the webhooks' (fleetRoutes), which need admin; deployments, their cancel and
// dispatch requests need deploy; the DLQ, targets' and limits' writes need admin.
// Deployments are created and cancelled only with a Temporal client.
func (s *server) apiRoutes(dlq DLQ) []apiRoute {
	routes := []apiRoute{
		{"POST /api/v1/dispatch-requests", apitoken.ScopeDeploy, s.enqueueDispatchRequests},
		{"GET /api/v1/dispatch-requests", apitoken.ScopeRead, s.listDispatchRequests},
		{"GET /api/v1/dispatch-requests/{id}", apitoken.ScopeRead, s.getDispatchRequest},
		{"GET /api/v1/limits", apitoken.ScopeRead, s.listLimits},
		{"POST /api/v1/limits", apitoken.ScopeAdmin, s.setLimit},
		{"GET /api/v1/limits/{name}", apitoken.ScopeRead, s.getLimit},
		{"DELETE /api/v1/limits/{name}", apitoken.ScopeAdmin, s.deleteLimit},
		{"GET /api/v1/targets", apitoken.ScopeRead, s.listTargets},
		{"GET /api/v1/targets/{name}", apitoken.ScopeRead, s.getTarget},
		{"GET /api/v1/thorax-instances", apitoken.ScopeRead, s.listThoraxInstances},
		{"POST /api/v1/targets", apitoken.ScopeAdmin, s.registerTarget},
		{"DELETE /api/v1/targets/{name}", apitoken.ScopeAdmin, s.deregisterTarget},
		{"GET /api/v1/dlq", apitoken.ScopeAdmin, s.listDLQ(dlq)},
		{"POST /api/v1/dlq/requeue", apitoken.ScopeAdmin, s.requeueDLQ(dlq)},
		{"POST /api/v1/dlq/purge", apitoken.ScopeAdmin, s.purgeDLQ(dlq)},
		{"GET /api/v1/deployments", apitoken.ScopeRead, s.listDeployments},
		{"GET /api/v1/deployments/{id}", apitoken.ScopeRead, s.getDeployment},
		{"GET /api/v1/deployments/{id}/output", apitoken.ScopeRead, s.getDeploymentOutput},
	}
	if s.temporal != nil {
		routes = append(routes,
			apiRoute{"POST /api/v1/deployments", apitoken.ScopeDeploy, s.createDeployment},
			apiRoute{"POST /api/v1/deployments/{id}/cancel", apitoken.ScopeDeploy, s.cancelDeployment})
	}
	routes = append(routes, s.fleetRoutes()...)
	routes = append(routes, s.decisionRoutes()...)
	routes = append(routes, s.relationRoutes()...)
	return routes
}
