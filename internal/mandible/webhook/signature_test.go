package webhook_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/webhook"
)

// A signature verifies for its body and secret only, and only near its time.
func TestSignatureVerifies(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":1}`)
	h := webhook.Sign("s3cret", now, body)
	require.Regexp(t, `^t=1800000000,v1=[0-9a-f]{64}$`, h)
	require.NoError(t, webhook.Verify("s3cret", h, body, now, time.Minute))
	require.Error(t, webhook.Verify("other", h, body, now, time.Minute))
	require.Error(t, webhook.Verify("s3cret", h, []byte(`{"id":2}`), now, time.Minute))
	require.Error(t, webhook.Verify("s3cret", h, body, now.Add(time.Hour), time.Minute))
	require.Error(t, webhook.Verify("s3cret", "v1=abc", body, now, time.Minute))
}

// Webhooks that are not http(s), want other events or have a short secret are
// refused, each problem named.
func TestWebhookProblems(t *testing.T) {
	t.Parallel()
	require.Empty(t, webhook.Problems(api.NewWebhook{URL: "https://hooks.example/x", EventTypes: []string{"deployment.*", "step.failed"}, Secret: "0123456789abcdef"}))
	got := webhook.Problems(api.NewWebhook{URL: "ftp://x/y", EventTypes: []string{"target.running"}, Secret: "short"})
	require.Len(t, got, 3)
	require.Contains(t, got[0].String(), "url: must be http:// or https://")
	require.Equal(t, "event_types[0]", got[1].Field)
	require.Equal(t, "secret", got[2].Field)
	require.Contains(t, webhook.Problems(api.NewWebhook{URL: "http://u:p@x/", EventTypes: []string{"step.*"}, Secret: "0123456789abcdef"})[0].Problem, "credentials")
}
