package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// hostileCommand prints a NUL, 100 random bytes (invalid UTF-8, escape sequences and
// more NULs as they come) and an escape sequence with a carriage return.
const hostileCommand = `printf 'a\000b'; head -c 100 /dev/urandom; printf '\033[31mred\r\nend\n'`

// A step whose output is bytes that are no text ends succeeded on a poll-mode and a
// listen-mode agent; the bytes are stored as printed, the API and the events show
// valid UTF-8 without NUL, and mantisctl shows it with control characters escaped.
func TestOutputThatIsNotTextIsStoredAndShownOnBothAgentModes(t *testing.T) {
	s := setupExec(t)
	r := s.mandible.replica
	spec := fmt.Sprintf(`{"name":"bytes","targets":[%q,%q],"steps":[{"name":"print","command":%q}]}`,
		s.poll.Name, s.listen.Name, hostileCommand)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)

	d := waitDeployment(t, r, id, "succeeded")
	targets := d["steps"].([]any)[0].(map[string]any)["targets"].([]any)
	require.Len(t, targets, 2)
	for _, tv := range targets {
		target := tv.(map[string]any)
		require.Equal(t, "succeeded", target["status"], target)
		tail := target["output_tail"].(string)
		require.True(t, strings.HasPrefix(tail, "a\u2400b"), "%s: %q", target["target"], tail)
		require.True(t, strings.HasSuffix(tail, "\x1b[31mred\r\nend\n"), "%s: %q", target["target"], tail)
		require.NotContains(t, tail, "\x00")
	}

	raw := rawAPI(t, r, "/api/v1/deployments/"+id)
	require.True(t, utf8.Valid(raw), "the API answers valid UTF-8")
	require.NotContains(t, string(raw), `\u0000`)

	rows, err := s.pool.Query(s.ctx, `
		SELECT c.output_raw, e.data->>'output_tail'
		FROM command_queue c JOIN deployment_events e ON e.deployment_id = c.deployment_id
		     AND e.type = 'target.succeeded' AND (e.data->>'command_id')::uuid = c.id
		WHERE c.deployment_id = $1`, id)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			stored []byte
			event  string
		)
		require.NoError(t, rows.Scan(&stored, &event))
		require.True(t, bytes.HasPrefix(stored, []byte("a\x00b")), "the raw bytes are kept: %q", stored)
		require.Len(t, stored, len("a\x00b")+100+len("\x1b[31mred\r\nend\n"))
		require.True(t, strings.HasPrefix(event, "a\u2400b"), event)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 2, n, "one stored result and one event per target")

	// mantisctl run prints every target's tail, through terminal escaping.
	out, exit := mantisctl(t, r, "run", "--targets", s.poll.Name+","+s.listen.Name, "--", hostileCommand)
	require.Equal(t, 0, exit, out)
	require.Equal(t, 2, strings.Count(out, "\na\u2400b"), out)
	require.Contains(t, out, `\x1b[31mred`)
	require.NotContains(t, out, "\x1b")
	require.NotContains(t, out, "\r")
}

// rawAPI returns the body of a GET on a replica's HTTP API, as bytes.
func rawAPI(t *testing.T, r *replica, path string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.HTTPAddr+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.True(t, json.Valid(body))
	return body
}
