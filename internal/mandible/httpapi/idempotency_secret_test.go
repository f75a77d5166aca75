package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// A create under another deployment's idempotency key is no oracle for its secret:
// a right and a wrong guess of the secret value get the same answer. The names of
// the secret env still take part in the comparison, as every other field does.
func TestIdempotentCreateAnswersAlikeForAnyGuessOfASecret(t *testing.T) {
	t.Parallel()
	c := newTestCodec(t)
	b, pool, _ := secretSetup(t, c)

	code, first := b.createWithKey(t, "release-1", "application/json", secretSpec)
	require.Equal(t, http.StatusAccepted, code, "%v", first)

	rightCode, right := b.createWithKey(t, "release-1", "application/json", secretSpec)
	wrongCode, wrong := b.createWithKey(t, "release-1", "application/json", strings.Replace(secretSpec, "s3cret-value", "guess-0001", 1))
	require.Equal(t, rightCode, wrongCode, "right guess: %v; wrong guess: %v", right, wrong)
	require.Equal(t, right, wrong)
	require.Equal(t, http.StatusOK, wrongCode)
	require.Equal(t, first["id"], wrong["id"])

	renamed := strings.Replace(secretSpec, `"TOKEN":`, `"OTHER_TOKEN":`, 1)
	code, conflict := b.createWithKey(t, "release-1", "application/json", renamed)
	require.Equal(t, http.StatusConflict, code, "%v", conflict)
	require.Equal(t, string(api.CodeIdempotencyConflict), conflict["code"])

	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM deployments`).Scan(&n))
	require.Equal(t, 1, n, "no guess creates a deployment")
}
