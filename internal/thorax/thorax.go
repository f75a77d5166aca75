// Package thorax is the Mantis execution tier: it registers with Mandible and
// heartbeats, claims commands through Mandible's FetchPendingCommands, hands
// each to its target's agent (calling a listen-mode agent, or queueing for a
// poll-mode agent's long poll), and stores every result back in Mandible. It
// has no database connection: Mandible owns every row, and Thorax only holds
// leases on commands.
//
// With [queue] enabled, broker consumers of the three priority queues claim
// each nudged command at once through FetchNow, high before normal before low,
// and switch the polling tick (SetBrokerHealthy) between polling.interval while
// they run and polling.fallback_interval while the broker is unreachable.
package thorax

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

const (
	modeListen = config.ModeListen
	modePoll   = config.ModePoll
)

// Timing the configuration does not expose.
const (
	// callTimeout bounds each call to Mandible.
	callTimeout = 10 * time.Second
	// resultGrace is how long past a command's own timeout Thorax waits for its
	// result: the agent kills the command at its timeout and then still has to
	// answer.
	resultGrace = time.Minute
	// untimedLimit stands in for the timeout of a command that carries none.
	untimedLimit = time.Hour
	// maxCommandTimeout caps the timeout a command carries: Mandible refuses more
	// (spec.MaxStepTimeout), and a larger one would overflow the deadlines below.
	maxCommandTimeout = 24 * time.Hour
	// pollWindowFloor is the shortest poll wait counted when deciding that a
	// poll-mode agent is still connected: a target stays connected for three
	// of its agent's poll waits (at least three times this) after a poll.
	pollWindowFloor = 5 * time.Second
	// maxPollWait caps PollCommands' wait.
	maxPollWait = 60 * time.Second
	// maxFetch is the largest max_commands Mandible accepts.
	maxFetch = 1000
	// sweepInterval is how often overdue and stranded commands are looked for.
	sweepInterval = time.Second
	// retryWindow bounds the retries of one redispatch or release. A result
	// store has no bound but the drain's: a result is retried until Mandible
	// acknowledges or refuses it.
	retryWindow = 10 * time.Minute
	// giveUpWindow bounds the retries of the redispatch asked for when a
	// nudge is dead-lettered: the broker delivery waits on it.
	giveUpWindow = 30 * time.Second
	// stopGrace bounds the agents server's graceful stop once the drain is over.
	stopGrace = 5 * time.Second
)

// Errors FetchNow returns instead of claiming.
var (
	// ErrDraining: the instance is draining and claims nothing more.
	ErrDraining = errors.New("thorax is draining")
	// ErrNotRegistered: the instance has no id from Mandible yet (starting, or
	// registering again after Mandible declared it dead).
	ErrNotRegistered = errors.New("thorax is not registered with mandible")
	// ErrAtCapacity: the instance holds polling.max_held_commands already.
	ErrAtCapacity = errors.New("thorax holds as many commands as it may")
)

// Thorax is one execution-tier instance. Build it with New and run it with
// Run; the other methods are safe to call from any goroutine.
type Thorax struct {
	cfg    config.Thorax
	logger *slog.Logger

	mandibleCreds credentials.TransportCredentials
	// agentCreds returns the credentials of a call to a listen target's agent.
	agentCreds func(target string) credentials.TransportCredentials
	serverOpts []grpc.ServerOption
	// agentGuard admits only the agent role to the agents server; nil with
	// agents.insecure, where there are no identities.
	agentGuard *identity.Guard
	registry   *prometheus.Registry
	idMetrics  *identity.Metrics
	metrics    *metrics

	book   *book
	agents *agentConns
	// output queues live output on its way to Mandible (runOutput sends it).
	output *outputForwarder

	mu            sync.Mutex
	mandible      mantisv1.MandibleServiceClient
	instanceID    string
	idChanged     chan struct{} // closed (and replaced) when instanceID changes
	listenTargets []string
	brokerHealthy bool
	agentsAddr    string
	work          context.Context

	// background tracks calls that must not hold up their caller (agent
	// cancellations); Run waits for them before it returns.
	background sync.WaitGroup

	ready           chan struct{}
	wake            chan struct{} // capacity 1: fetch at once
	intervalChanged chan struct{} // capacity 1: the polling interval changed
	beat            chan struct{} // capacity 1: heartbeat at once
	// drainHeard is closed once Mandible has acknowledged a heartbeat saying the
	// instance drains: from then on its listen targets have moved.
	drainHeard     chan struct{}
	drainHeardOnce sync.Once
	dead           chan string // capacity 1: Mandible declared this instance id dead

	// Timing, fixed in production; tests shorten it.
	resultGrace     time.Duration
	untimedLimit    time.Duration
	pollWindowFloor time.Duration
	sweepInterval   time.Duration
	registerBackoff backoff.Backoff
	retryBackoff    backoff.Backoff
}

// New checks the configuration's certificate files and returns an instance
// ready to Run. cfg must have passed Validate.
func New(cfg config.Thorax, logger *slog.Logger) (*Thorax, error) {
	t := &Thorax{
		cfg:             cfg,
		logger:          logger,
		book:            newBook(cfg.Polling.MaxHeldCommands),
		output:          newOutputForwarder(),
		ready:           make(chan struct{}),
		wake:            make(chan struct{}, 1),
		intervalChanged: make(chan struct{}, 1),
		beat:            make(chan struct{}, 1),
		drainHeard:      make(chan struct{}),
		dead:            make(chan string, 1),
		idChanged:       make(chan struct{}),
		resultGrace:     resultGrace,
		untimedLimit:    untimedLimit,
		pollWindowFloor: pollWindowFloor,
		sweepInterval:   sweepInterval,
		registerBackoff: backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second},
		retryBackoff:    backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second},
		registry:        prometheus.NewRegistry(),
	}
	t.idMetrics = identity.NewMetrics(t.registry)
	t.metrics = newMetrics(t, t.registry)
	if cfg.Mandible.Insecure {
		t.mandibleCreds = insecure.NewCredentials()
	} else {
		tc, err := tlsconf.Client(tlsFiles(cfg.Mandible.TLS, logger), "")
		if err != nil {
			return nil, fmt.Errorf("mandible TLS: %w", err)
		}
		tlsconf.RequirePeerRole(tc, identity.RoleMandible, identity.HandshakeRefusals(identity.LinkMandibleGRPC, logger, t.idMetrics))
		t.mandibleCreds = credentials.NewTLS(tc)
	}
	if cfg.Agents.Insecure {
		t.agentCreds = func(string) credentials.TransportCredentials { return insecure.NewCredentials() }
	} else {
		client, err := tlsconf.Client(tlsFiles(cfg.Agents.TLS, logger), "")
		if err != nil {
			return nil, fmt.Errorf("agents TLS: %w", err)
		}
		refused := identity.HandshakeRefusals(identity.LinkListenAgent, logger, t.idMetrics)
		tlsconf.RequirePeerRole(client, identity.RoleAgent, refused)
		server, err := tlsconf.Server(tlsFiles(cfg.Agents.TLS, logger))
		if err != nil {
			return nil, fmt.Errorf("agents TLS: %w", err)
		}
		t.agentCreds = listenTargetCreds(client, refused)
		t.agentGuard = newAgentGuard(logger, t.idMetrics)
		t.serverOpts = append(t.serverOpts, grpc.Creds(credentials.NewTLS(server)))
		t.serverOpts = append(t.serverOpts, t.agentGuard.ServerOptions()...)
	}
	if cfg.Queue.Enabled {
		q := cfg.Queue
		if _, err := tlsconf.Client(tlsconf.Files{CA: q.CACertPath, Cert: q.ClientCertPath, Key: q.ClientKeyPath}, q.Host); err != nil {
			return nil, fmt.Errorf("queue TLS: %w", err)
		}
	}
	t.agents = newAgentConns(t.agentCreds, t.metrics.rpc.DialOptions()...)
	t.agents.loopbackOnly = cfg.Agents.Insecure && !cfg.Agents.InsecureAllowRemote
	// Outermost, so that calls the guard refuses are counted too.
	t.serverOpts = append(t.metrics.rpc.ServerOptions(), t.serverOpts...)
	return t, nil
}

// listenTargetCreds returns the credentials of calls to a listen target's agent:
// client's, narrowed to a server whose certificate is the agent of that very
// target (spiffe://mantis/agent/<target>), as Thorax's agents server admits a
// poll-mode agent only for its own target. Any agent pair of the CA answering at
// a target's address (a mistyped or stale registration, or an impostor) is
// refused at the handshake, naming the target called and the identity presented,
// before the command or its opened secrets leave Thorax; refused logs and counts
// it.
func listenTargetCreds(client *tls.Config, refused tlsconf.RefusalHook) func(string) credentials.TransportCredentials {
	return func(target string) credentials.TransportCredentials {
		c := client.Clone()
		tlsconf.RequirePeerID(c, identity.ID{Role: identity.RoleAgent, Name: target}, identity.BindingTarget, refused)
		return credentials.NewTLS(c)
	}
}

// tlsFiles names the files of a link; logger hears of their reloads.
func tlsFiles(c config.TLS, logger *slog.Logger) tlsconf.Files {
	return tlsconf.Files{CA: c.CACertPath, Cert: c.CertPath, Key: c.KeyPath, Logger: logger}
}

// Registry returns the instance's own registry of its identity metrics: the
// refusals of its agents server and the expiry of its own certificates.
func (t *Thorax) Registry() *prometheus.Registry { return t.registry }

// IdentityMetrics returns the identity metrics as a collector, for a metrics
// listener to serve (metrics.listen).
func (t *Thorax) IdentityMetrics() prometheus.Collector { return t.idMetrics }

// Ready is closed once the agents server listens and Mandible has issued the
// instance its id.
func (t *Thorax) Ready() <-chan struct{} { return t.ready }

// InstanceID returns the id Mandible issued, or "" while (re-)registering.
func (t *Thorax) InstanceID() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.instanceID
}

// AgentsAddr returns the address the agents server listens on, once Ready.
func (t *Thorax) AgentsAddr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.agentsAddr
}

// workContext returns the context of the hand-offs of a running instance,
// which outlives ctx and ends when the drain gives up.
func (t *Thorax) workContext(ctx context.Context) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.work == nil {
		return context.WithoutCancel(ctx)
	}
	return t.work
}

// registration returns the Mandible client and the current instance id.
func (t *Thorax) registration() (mantisv1.MandibleServiceClient, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mandible, t.instanceID
}

// buildVersion returns the module version the binary was built from.
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// reconnectQuickly caps gRPC's reconnect backoff (two minutes by default) at a
// second: a Mandible that comes back is reached again at once, well within the
// heartbeat timeout it grants every instance after its own recovery, and a listen
// agent that restarts gets its next command without waiting.
var reconnectQuickly = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff: grpcbackoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	MinConnectTimeout: 5 * time.Second,
})
