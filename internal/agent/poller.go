package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/backoff"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/telemetry"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

const (
	// PollWait is how long Thorax may hold a PollCommands call before it
	// answers empty (the protocol allows up to 60 s).
	PollWait = 30 * time.Second
	// pollGrace is added to PollWait for the call's deadline, so a Thorax
	// that answers on time is never cut off but a dead connection is.
	pollGrace = 10 * time.Second
	// maxPollCommands is the most a PollCommands call may ask for.
	maxPollCommands = 100
	// reportTimeout bounds one ReportResult attempt.
	reportTimeout = 10 * time.Second
	// ResultBuffer is how many finished results wait for Thorax at most;
	// beyond it a finished command keeps its run slot until its result is
	// queued, so the agent stops asking for work it cannot report.
	ResultBuffer = 256
	// flushTimeout bounds how long a stopping agent keeps trying to report
	// the results it still holds.
	flushTimeout = 5 * time.Second
)

// Poller is the poll-mode agent: it long-polls its Thorax for the target's
// commands, asking for no more than it has free run slots, runs them, and
// reports each result, retrying until Thorax takes it.
type Poller struct {
	target      string
	conn        *grpc.ClientConn
	client      mantisv1.ThoraxServiceClient
	runner      *Runner
	logger      *slog.Logger
	stopTimeout time.Duration
	results     chan report
	// output reports the runs' live output to Thorax.
	output *pollOutput
	// held are the commands the agent owes a result for, named in each poll.
	held *heldCommands
	// session tells this process's polls from those of any other agent process
	// of the target: Thorax hands again only what this session's polls took.
	session string
}

// report is a result waiting to be reported under a command's id and lease.
type report struct {
	key               string // the run's journal key; "" for a command never run
	commandID         string
	leaseEpoch        int64
	dispatchRequestID string
	result            *mantisv1.CommandResult
	traceParent       string // the hand-off's trace context the command came with
}

// reportOf is the report of res to the command cmd, whose run key is key.
func reportOf(key string, cmd *mantisv1.Command, res *mantisv1.CommandResult) report {
	return report{key: key, commandID: cmd.GetId(), leaseEpoch: cmd.GetLeaseEpoch(),
		dispatchRequestID: cmd.GetDispatchRequestId(), result: res, traceParent: cmd.GetTraceParent()}
}

// NewPoller returns a Poller for the agent cfg (mode poll) that runs commands
// on runner. It does not connect yet: Run does, and keeps reconnecting.
func NewPoller(cfg config.Agent, runner *Runner, logger *slog.Logger) (*Poller, error) {
	var idMetrics *identity.Metrics
	if runner.metrics != nil {
		idMetrics = identity.NewMetrics(runner.metrics.reg)
	}
	creds, err := ThoraxCredentials(cfg.Thorax, identity.HandshakeRefusals(identity.LinkThoraxAgents, logger, idMetrics))
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(cfg.Thorax.Address, append(runner.metrics.dialOptions(),
		grpc.WithTransportCredentials(creds),
		telemetry.GRPCDialOption(),
		rpc.DialOption(),
		// gRPC's own reconnect backoff, capped like ours, so a restarted
		// Thorax is found again within MaxRetryDelay rather than two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{
				BaseDelay:  retryBaseDelay,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   MaxRetryDelay,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
	)...)
	if err != nil {
		return nil, fmt.Errorf("thorax.address %s: %w", cfg.Thorax.Address, err)
	}
	p := &Poller{
		target:      cfg.Name,
		conn:        conn,
		client:      mantisv1.NewThoraxServiceClient(conn),
		runner:      runner,
		logger:      logger.With("target", cfg.Name, "thorax_address", cfg.Thorax.Address),
		stopTimeout: cfg.Exec.StopTimeout.Duration,
		results:     make(chan report, ResultBuffer),
		held:        newHeldCommands(),
		session:     uuid.NewString(),
	}
	p.output = newPollOutput(cfg.Name, p.client, p.logger)
	runner.output = p.output
	return p, nil
}

// ThoraxCredentials returns the transport security of the thorax section:
// TLS that verifies Thorax's certificate against thorax.ca_cert_path and
// presents the agent's own pair, or plaintext when thorax.insecure is set. A server
// refused for its role goes to refused (log and count it with
// identity.HandshakeRefusals).
func ThoraxCredentials(cfg config.Endpoint, refused ...tlsconf.RefusalHook) (credentials.TransportCredentials, error) {
	if cfg.Insecure {
		return insecure.NewCredentials(), nil
	}
	// No server name: gRPC checks the certificate against the host of
	// thorax.address.
	tc, err := tlsconf.Client(tlsconf.Files{CA: cfg.CACertPath, Cert: cfg.CertPath, Key: cfg.KeyPath}, "")
	if err != nil {
		return nil, err
	}
	tlsconf.RequirePeerRole(tc, identity.RoleThorax, refused...)
	return credentials.NewTLS(tc), nil
}

// Run first queues the results that the journal holds unacknowledged (from
// before a restart), then polls until ctx is done and never gives up on
// Thorax before that. Then it stops asking for work, gives running commands
// exec.stop_timeout before killing their process groups, reports what it can
// within a few seconds, closes the connection and returns; results still
// unacknowledged stay in the journal for the next start. A Poller runs once.
func (p *Poller) Run(ctx context.Context) error {
	defer p.conn.Close()
	reportCtx, stopReports := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReports()
	var reporters sync.WaitGroup
	for range cap(p.runner.slots) {
		reporters.Go(func() { p.reportLoop(reportCtx) })
	}
	// Live output is not waited for at stop: what is left of it is dropped.
	outputCtx, stopOutput := context.WithCancel(reportCtx)
	defer stopOutput()
	go p.output.run(outputCtx)

	var commands sync.WaitGroup
	if pending := p.runner.journal.Pending(); len(pending) > 0 {
		p.logger.InfoContext(ctx, "reporting results journaled before a restart", "results", len(pending))
		for _, pr := range pending {
			p.held.add(pr.CommandID)
		}
		commands.Go(func() {
			for _, pr := range pending {
				p.enqueue(reportCtx, report{key: pr.Key, commandID: pr.CommandID, leaseEpoch: pr.LeaseEpoch,
					dispatchRequestID: pr.DispatchRequestID, result: pr.Result})
			}
		})
	}
	p.poll(ctx, reportCtx, &commands)

	p.logger.InfoContext(ctx, "agent stopping: no new commands", "running", cap(p.runner.slots)-p.runner.Free())
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.stopTimeout)
	if killed := p.runner.Shutdown(stopCtx); killed > 0 {
		p.logger.WarnContext(ctx, "killed commands still running at stop", "killed", killed)
	}
	cancel()

	drained := make(chan struct{})
	go func() {
		commands.Wait()
		close(p.results)
		reporters.Wait()
		close(drained)
	}()
	flush := time.NewTimer(flushTimeout)
	defer flush.Stop()
	select {
	case <-drained:
	case <-flush.C:
		stopReports()
		<-drained
		for r := range p.results {
			p.unreported(ctx, r)
		}
	}
	return nil
}

// poll asks Thorax for commands while there are free slots, until ctx is
// done, and starts each command it gets.
func (p *Poller) poll(ctx, reportCtx context.Context, commands *sync.WaitGroup) {
	retry := newRetryBackoff()
	failing := false
	for {
		n, err := p.runner.acquire(ctx, maxPollCommands)
		if err != nil {
			return
		}
		held, complete := p.held.names()
		callCtx, cancel := context.WithTimeout(ctx, PollWait+pollGrace)
		resp, err := p.client.PollCommands(callCtx, &mantisv1.PollCommandsRequest{
			Target:         p.target,
			MaxCommands:    int32(n),
			Wait:           durationpb.New(PollWait),
			HeldCommandIds: held,
			NamesHeld:      complete,
			Session:        p.session,
		})
		cancel()
		if err != nil {
			p.runner.release(n)
			if ctx.Err() != nil {
				return
			}
			delay := retry.Next()
			p.logger.WarnContext(ctx, "polling thorax failed", "err", err, "retry_in", delay)
			failing = true
			if !backoff.Sleep(ctx, delay) {
				return
			}
			continue
		}
		if failing {
			p.logger.InfoContext(ctx, "polling thorax again")
			failing = false
		}
		retry.Reset()

		for _, id := range resp.GetCancelCommandIds() {
			if p.runner.Cancel(id) {
				p.logger.InfoContext(ctx, "cancelled command at thorax's request", "command_id", id)
			}
		}
		cmds := resp.GetCommands()
		for _, cmd := range cmds {
			p.held.add(cmd.GetId())
		}
		if len(cmds) < n {
			p.runner.release(n - len(cmds))
		}
		for i, cmd := range cmds {
			// Thorax sent more than asked: the extra ones wait for a slot
			// rather than break exec.max_concurrent.
			if i >= n {
				if _, err := p.runner.acquire(ctx, 1); err != nil {
					for _, unrun := range cmds[i:] {
						commands.Go(func() {
							p.enqueue(reportCtx, reportOf("", unrun, notRun(ErrStopping)))
						})
					}
					return
				}
			}
			commands.Go(func() {
				defer p.runner.release(1)
				p.runCommand(ctx, reportCtx, cmd)
			})
		}
	}
}

// runCommand runs cmd's request on a slot the caller holds, or joins its run,
// or takes its stored result, and queues the result for cmd. The run ignores
// ctx: stopping the agent lets it finish within exec.stop_timeout
// (Runner.Shutdown), it does not kill it at once.
func (p *Poller) runCommand(ctx, reportCtx context.Context, cmd *mantisv1.Command) {
	if err := ValidateCommand(cmd); err != nil {
		p.logger.WarnContext(ctx, "refusing malformed command", "command_id", cmd.GetId(), "err", err)
		p.enqueue(reportCtx, reportOf("", cmd, notRun(err)))
		return
	}
	key := p.runner.runKey(ctx, cmd)
	run, err := p.runner.startHeld(context.WithoutCancel(ctx), cmd)
	if err != nil {
		p.logger.ErrorContext(ctx, "refusing command", "command_id", cmd.GetId(), "err", err)
		p.enqueue(reportCtx, reportOf("", cmd, notRun(err)))
		return
	}
	res, _ := run.Wait(context.Background()) // the run always ends: Shutdown kills it at worst
	p.enqueue(reportCtx, reportOf(key, cmd, res))
}

// enqueue waits for room in the result buffer, or for reportCtx to end.
func (p *Poller) enqueue(reportCtx context.Context, r report) {
	select {
	case p.results <- r:
	case <-reportCtx.Done():
		p.unreported(reportCtx, r)
	}
}

// unreported logs a result the agent stops without reporting.
func (p *Poller) unreported(ctx context.Context, r report) {
	if r.key != "" {
		p.logger.WarnContext(ctx, "result not reported before stop: kept in the journal for the next start",
			"command_id", r.commandID, "run_key", r.key)
		return
	}
	p.logger.ErrorContext(ctx, "result dropped: agent stopped before thorax took it", "command_id", r.commandID)
}

// reportLoop reports queued results until the queue is closed or ctx ends.
func (p *Poller) reportLoop(ctx context.Context) {
	for {
		select {
		case r, ok := <-p.results:
			if !ok {
				return
			}
			p.deliver(ctx, r)
		case <-ctx.Done():
			return
		}
	}
}

// deliver reports one result under its command's id, lease epoch and
// dispatch request id, retrying every transient failure with backoff until
// Thorax takes it, refuses it for good, or ctx ends. Taken or refused, the
// journal stops owing it; otherwise it stays owed for the next start.
func (p *Poller) deliver(ctx context.Context, r report) {
	logger := p.logger.With("command_id", r.commandID, "dispatch_request_id", r.dispatchRequestID)
	retry := newRetryBackoff()
	for {
		callCtx, cancel := context.WithTimeout(telemetry.WithTraceParent(ctx, r.traceParent), reportTimeout)
		_, err := p.client.ReportResult(callCtx, &mantisv1.ReportResultRequest{
			Target:            p.target,
			CommandId:         r.commandID,
			Result:            r.result,
			LeaseEpoch:        r.leaseEpoch,
			DispatchRequestId: r.dispatchRequestID,
		})
		cancel()
		switch {
		case err == nil:
			logger.DebugContext(ctx, "result reported")
			p.acknowledged(ctx, r)
			return
		case ctx.Err() != nil:
			p.unreported(ctx, r)
			return
		case !rpc.Retryable(err):
			logger.ErrorContext(ctx, "thorax refused result", "err", err, "code", status.Code(err).String())
			p.acknowledged(ctx, r)
			return
		}
		delay := retry.Next()
		logger.WarnContext(ctx, "reporting result failed", "err", err, "retry_in", delay)
		if !backoff.Sleep(ctx, delay) {
			p.unreported(ctx, r)
			return
		}
	}
}

// acknowledged records that Thorax answered r for good.
func (p *Poller) acknowledged(ctx context.Context, r report) {
	p.held.remove(r.commandID)
	if r.key == "" {
		return
	}
	if err := p.runner.journal.Acknowledge(r.key, r.commandID); err != nil {
		// At worst the result is reported again after a restart, which
		// Thorax and Mandible take as the duplicate it is.
		p.logger.WarnContext(ctx, "journaling an acknowledged result failed", "command_id", r.commandID, "err", err)
	}
}

// notRun is the result of a command the agent did not run.
func notRun(err error) *mantisv1.CommandResult {
	now := timestamppb.Now()
	return &mantisv1.CommandResult{ExitCode: -1, Error: boundError(err.Error()), StartedAt: now, FinishedAt: now}
}
