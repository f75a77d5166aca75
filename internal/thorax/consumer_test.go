package thorax

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// With [queue] enabled, unreadable broker certificates stop Thorax at start
// rather than in an endless reconnection loop.
func TestThoraxChecksTheQueueCertificatesAtStart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cfg := f.cfg
	cfg.Queue.Enabled = true
	cfg.Queue.Host, cfg.Queue.Username, cfg.Queue.Password = "localhost", "mantis", "secret"
	cfg.Queue.CACertPath = t.TempDir() + "/missing-ca.crt"
	require.NoError(t, cfg.Validate())
	_, err := New(cfg, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "queue TLS")

	cfg.Queue.CACertPath = f.certs.CACert()
	cfg.Queue.ClientCertPath, cfg.Queue.ClientKeyPath = f.certs.Pair("client")
	_, err = New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
}

// The broker consumers hear of every change of instance id.
func TestThoraxBrokerConsumersHearOfIDChanges(t *testing.T) {
	t.Parallel()
	th, err := New(setup(t).cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	id, changed := th.registrationWatch()
	require.Empty(t, id)
	th.mu.Lock()
	th.setInstanceIDLocked("first")
	th.mu.Unlock()
	<-changed
	id, changed = th.registrationWatch()
	require.Equal(t, "first", id)
	th.mu.Lock()
	th.setInstanceIDLocked("first")
	th.mu.Unlock()
	select {
	case <-changed:
		t.Fatal("the same id is no change")
	default:
	}
	th.mu.Lock()
	th.setInstanceIDLocked("")
	th.mu.Unlock()
	<-changed
}
