package thorax

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/telemetry"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// agentConns keeps one client connection per listen-mode target and address;
// gRPC reconnects each on its own. Each connection's credentials come from
// credsFor(target): over TLS they accept only a server whose certificate names
// that target, so the connection of one target is never used for another.
type agentConns struct {
	credsFor func(target string) credentials.TransportCredentials
	// loopbackOnly refuses addresses off loopback: agents.insecure without
	// agents.insecure_allow_remote.
	loopbackOnly bool
	extra        []grpc.DialOption // the metrics interceptors
	mu           sync.Mutex
	conns        map[agentKey]*grpc.ClientConn
}

// agentKey is the target a connection calls and the address it dials.
type agentKey struct{ target, addr string }

func newAgentConns(credsFor func(target string) credentials.TransportCredentials, extra ...grpc.DialOption) *agentConns {
	return &agentConns{credsFor: credsFor, extra: extra, conns: map[agentKey]*grpc.ClientConn{}}
}

// client returns the AgentService client of target's agent at addr.
func (a *agentConns) client(target, addr string) (mantisv1.AgentServiceClient, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loopbackOnly && !config.LoopbackAddress(addr) {
		return nil, fmt.Errorf("calling %q in plaintext: not a loopback address, and agents.insecure_allow_remote is not set", addr)
	}
	key := agentKey{target: target, addr: addr}
	conn, ok := a.conns[key]
	if !ok {
		var err error
		conn, err = grpc.NewClient(addr, append(slices.Clone(a.extra),
			grpc.WithTransportCredentials(a.credsFor(target)), reconnectQuickly, telemetry.GRPCDialOption(), rpc.DialOption())...)
		if err != nil {
			return nil, err
		}
		a.conns[key] = conn
	}
	return mantisv1.NewAgentServiceClient(conn), nil
}

func (a *agentConns) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, conn := range a.conns {
		conn.Close()
		delete(a.conns, key)
	}
}

// listenWorker runs listen-mode commands one at a time until the instance
// drains; agents.max_concurrent_calls workers bound the calls in flight.
func (t *Thorax) listenWorker(work context.Context) {
	for {
		h, ok := t.book.nextListen(work)
		if !ok {
			return
		}
		t.runListen(work, h)
	}
}

// runListen calls the command's agent and stores the result. A call that
// fails hands the command back to Mandible for another dispatch; one cut off
// by the end of the drain is abandoned.
func (t *Thorax) runListen(work context.Context, h *holding) {
	defer t.book.finish(h)
	attrs := []any{"command_id", h.cmd.GetId(), "target", h.cmd.GetTarget(), "agent", h.cmd.GetListenAddress()}
	client, err := t.agents.client(h.cmd.GetTarget(), h.cmd.GetListenAddress())
	if err != nil {
		t.redispatch(work, h, fmt.Sprintf("listen agent address %q: %v", h.cmd.GetListenAddress(), err))
		return
	}
	traced, span, cmd := startHandoff(work, h.cmd)
	defer span.End()
	callCtx, cancel := context.WithTimeout(traced, t.resultWait(h.cmd))
	defer cancel()
	t.logger.DebugContext(work, "calling listen agent", attrs...)
	// The output watch ends when the agent ends it, after the command; its own bound
	// lets the last chunks through after the call has returned.
	watchCtx, stopWatch := context.WithTimeout(work, t.resultWait(h.cmd))
	t.background.Go(func() { defer stopWatch(); t.watchListenOutput(watchCtx, client, h) })
	resp, err := client.RunCommand(callCtx, &mantisv1.RunCommandRequest{Command: cmd})
	if err != nil {
		if work.Err() != nil {
			t.logger.WarnContext(work, "listen call cut off at the end of the drain", append(attrs, "err", err)...)
			return
		}
		st := status.Convert(err)
		t.logger.WarnContext(work, "handing command to listen agent failed", append(attrs, "code", st.Code().String(), "err", err)...)
		t.redispatch(work, h, fmt.Sprintf("listen agent %s at %s: %s: %s",
			h.cmd.GetTarget(), h.cmd.GetListenAddress(), st.Code(), st.Message()))
		return
	}
	result := resp.GetResult()
	if result == nil {
		// The agent ran the command (or tried) but said nothing about it;
		// storing a failed result beats running it again.
		now := timestamppb.New(time.Now())
		result = &mantisv1.CommandResult{ExitCode: -1, Error: "agent answered without a result", FinishedAt: now}
	}
	t.book.markStoring(h)
	t.book.endStore(h, t.storeResult(traced, h, result))
}

// cancelCommands stops the commands Mandible cancelled (their deployment
// was): those no agent took are dropped, and listen-mode agents running one
// are asked to kill it. The calls run in the background so that a slow agent
// never delays a heartbeat.
func (t *Thorax) cancelCommands(ctx context.Context, ids []string) {
	if len(ids) == 0 {
		return
	}
	dropped, running := t.book.cancel(ids)
	for _, h := range dropped {
		t.logger.InfoContext(ctx, "dropped cancelled command before hand-off", "command_id", h.cmd.GetId(), "target", h.cmd.GetTarget())
	}
	for _, h := range running {
		t.background.Go(func() {
			attrs := []any{"command_id", h.cmd.GetId(), "target", h.cmd.GetTarget(), "agent", h.cmd.GetListenAddress()}
			client, err := t.agents.client(h.cmd.GetTarget(), h.cmd.GetListenAddress())
			if err == nil {
				callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
				_, err = client.CancelCommand(callCtx, &mantisv1.CancelCommandRequest{CommandId: h.cmd.GetId()})
				cancel()
			}
			if err != nil {
				t.logger.WarnContext(ctx, "asking listen agent to cancel a command failed", append(attrs, "err", err)...)
				return
			}
			t.logger.InfoContext(ctx, "asked listen agent to cancel a command", attrs...)
		})
	}
}
