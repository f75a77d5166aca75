package e2e_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/schema"
)

// holdingProxy forwards TCP between agents and Thorax's agents port. Once hold is
// called, the bytes Thorax sends on the connections open at that moment wait until
// the hold ends: a network that delivers a poll's answer after the agent's call has
// given up on it. Connections opened later pass at once.
type holdingProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	conns []*heldConn
}

// heldConn is one forwarded connection; release is closed when its Thorax-to-agent
// bytes may flow (at once for a connection opened outside a hold).
type heldConn struct {
	release chan struct{}
}

func startHoldingProxy(t *testing.T, upstream string) *holdingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &holdingProxy{ln: ln, upstream: upstream}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *holdingProxy) Addr() string { return p.ln.Addr().String() }

func (p *holdingProxy) serve() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			down.Close()
			continue
		}
		hc := &heldConn{release: make(chan struct{})}
		close(hc.release)
		p.mu.Lock()
		p.conns = append(p.conns, hc)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, down); up.Close() }()
		go func() { p.copyHeld(down, up, hc); down.Close() }()
	}
}

// copyHeld copies Thorax's bytes to the agent, each read waiting for the
// connection's release.
func (p *holdingProxy) copyHeld(dst, src net.Conn, hc *heldConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			release := hc.release
			p.mu.Unlock()
			<-release
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold holds Thorax's bytes on every open connection for d.
func (p *holdingProxy) hold(d time.Duration) {
	release := make(chan struct{})
	p.mu.Lock()
	for _, hc := range p.conns {
		hc.release = release
	}
	p.mu.Unlock()
	time.AfterFunc(d, func() { close(release) })
}

// A poll answer that reaches its agent only after the agent's call has given up
// (a real delay on the wire: a proxy holds Thorax's bytes past the call's deadline)
// loses nothing: the agent's next poll names what it holds, Thorax hands the command
// again at once, and it runs once, long before its timeout plus grace.
func TestCommandWhosePollAnswerArrivedTooLateIsHandedAgain(t *testing.T) {
	t.Parallel()
	c := setupExecCluster(t, 10*time.Second)
	th := c.startThorax(t)
	instance := c.waitRegistered(t, th)
	proxy := startHoldingProxy(t, th.AgentsAddr)
	a := c.startPollAgentAt(t, proxy.Addr())
	c.waitPollTarget(t, a, instance)

	// The agent's long poll waits in Thorax now. Its answer, and anything else
	// Thorax sends on this connection, is held past the call's deadline.
	late := agent.PollWait + 15*time.Second
	proxy.hold(late)
	ledger := filepath.Join(t.TempDir(), "ledger")
	request := c.enqueue(t, schema.NewDispatchRequest{
		Target: a.Name, Command: fmt.Sprintf("echo ran >> %s", ledger), Timeout: 10 * time.Minute,
	})
	handed := c.waitCommand(t, request, commandTimeout, "running")
	require.NotNil(t, handed.Holder)

	// Without the hand-off again the command would wait for its 10 minutes plus grace.
	done := c.waitCommand(t, request, late+time.Minute, "succeeded")
	require.Equal(t, handed.ID, done.ID, "the same command, not a redispatch")
	b, err := os.ReadFile(ledger)
	require.NoError(t, err)
	require.Equal(t, "ran\n", string(b), "it ran once")
	require.Contains(t, th.log(), "handing them again")
}
