package identity_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
)

func TestCheckExpiry(t *testing.T) {
	t.Parallel()
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	cert, _, err := certs.Issue(identity.RoleThorax, "thorax-1", nil)
	require.NoError(t, err)
	c, err := identity.ReadCertificate(cert)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	m := identity.NewMetrics(reg)
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))

	// Far from expiry: the metric, no warning. The same path twice is read once.
	identity.CheckExpiry(t.Context(), logger, m, time.Now(), cert, cert, "")
	require.Equal(t, float64(c.NotAfter.Unix()), metricValue(t, reg, identity.ExpiryMetric, map[string]string{"role": "thorax", "name": "thorax-1"}))
	require.NotContains(t, logs.String(), "certificate expires soon")

	// 13 days before: a warning naming the certificate.
	identity.CheckExpiry(t.Context(), logger, m, c.NotAfter.Add(-13*24*time.Hour), cert)
	require.Contains(t, logs.String(), `"msg":"certificate expires soon"`)
	require.Contains(t, logs.String(), `"identity":"thorax/thorax-1"`)

	// 15 days before: none.
	logs.Reset()
	identity.CheckExpiry(t.Context(), logger, m, c.NotAfter.Add(-15*24*time.Hour), cert)
	require.NotContains(t, logs.String(), "certificate expires soon")
}

func TestWatchExpiryWarnsAtStart(t *testing.T) {
	t.Parallel()
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	// A pair without identity, 3 days from expiry: watched under its common name.
	cert, _ := signedPair(t, certs, "old-pair", time.Now().Add(3*24*time.Hour))
	reg := prometheus.NewRegistry()
	m := identity.NewMetrics(reg)
	var logs syncBuffer
	ctx, cancel := contextWithCancel(t)
	done := make(chan struct{})
	go func() {
		identity.WatchExpiry(ctx, slog.New(slog.NewJSONHandler(&logs, nil)), m, cert)
		close(done)
	}()
	require.Eventually(t, func() bool {
		return bytes.Contains(logs.Bytes(), []byte(`"identity":"unknown/old-pair"`))
	}, 5*time.Second, 10*time.Millisecond)
	require.Positive(t, metricValue(t, reg, identity.ExpiryMetric, map[string]string{"role": "unknown", "name": "old-pair"}))
	cancel()
	<-done
}
