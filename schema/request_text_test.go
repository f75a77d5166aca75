package schema_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// A request whose text PostgreSQL could not store, or that is too long, is refused by
// field and nothing of the batch is written.
func TestRequestTextThatCannotBeStoredIsRefusedByField(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	ok := req("fine", "web-1", "normal")
	bad := req("bad", "web-1", "normal")
	bad.Command = "echo a\x00b"
	bad.WorkingDir = "/srv/\xff"
	bad.Env = map[string]string{"TOKEN": "x\x00", "BIG": strings.Repeat("v", 70<<10)}
	_, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, []schema.NewDispatchRequest{ok, bad})
	var inputErr *domain.InputError
	require.ErrorAs(t, err, &inputErr)
	joined := inputErr.Problems.String()
	require.Contains(t, joined, "requests[1].command: must not contain NUL")
	require.Contains(t, joined, "requests[1].working_dir: must be UTF-8 text")
	require.Contains(t, joined, "requests[1].env.TOKEN: must not contain NUL")
	require.Contains(t, joined, "requests[1].env.BIG: at most 65536 bytes")
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM pending_dispatch_requests`).Scan(&n))
	require.Zero(t, n, "nothing written on refusal")
}

// A target whose listen address is not host:port, or whose labels PostgreSQL could
// not store, is refused by field.
func TestTargetWithBadAddressOrLabelsIsRefusedByField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		target schema.NewTarget
		want   string
	}{
		{schema.NewTarget{Name: "a", Mode: schema.ModeListen, Address: "no-port"}, "address: must be host:port"},
		{schema.NewTarget{Name: "a", Mode: schema.ModeListen, Address: "h:99999"}, "address: port must be 1-65535"},
		{schema.NewTarget{Name: "a", Mode: schema.ModeListen, Address: "h\x00:80"}, "address: host must not contain NUL"},
		{schema.NewTarget{Name: "a", Mode: schema.ModePoll, Labels: map[string]string{"role": "w\x00"}}, "labels.role: must not contain NUL"},
		{schema.NewTarget{Name: "a", Mode: schema.ModePoll, Labels: map[string]string{"": "x"}}, "labels: keys must not be empty"},
		{schema.NewTarget{Name: "a", Mode: schema.ModePoll, Labels: map[string]string{"k": strings.Repeat("v", 2000)}}, "labels.k: at most 1024 bytes"},
	} {
		err := tc.target.Validate()
		var inputErr *domain.InputError
		require.ErrorAs(t, err, &inputErr, "%+v", tc.target)
		require.Contains(t, inputErr.Problems.String(), tc.want)
	}
	require.NoError(t, schema.NewTarget{Name: "a", Mode: schema.ModeListen, Address: "10.0.0.5:9191", Labels: map[string]string{"role": "web"}}.Validate())
}
