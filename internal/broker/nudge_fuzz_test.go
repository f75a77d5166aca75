package broker_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
)

// nudgeFields are the fields a nudge refusal may name.
var nudgeFields = []string{"command_id", "target", "mode", "priority", "max_retries", "assigned_instance_id"}

// FuzzDecodeNudge feeds any bytes to the nudge decoder, as a broker delivery would: it
// never panics, a refusal says what it was decoding and names the bad field when there
// is one, and an accepted nudge is valid and decodes again from its own JSON.
func FuzzDecodeNudge(f *testing.F) {
	for _, s := range []string{
		`{"command_id":"c1","target":"web-1","mode":"poll","priority":"normal","max_retries":10}`,
		`{"command_id":"c1","target":"web-1","mode":"listen","priority":"high","assigned_instance_id":"i","max_retries":0}`,
		`{"command_id":"c1","target":"web-1","mode":"push","priority":"normal"}`,
		`{"command_id":"c1","target":"web-1","mode":"poll","priority":"normal","max_retries":-1}`,
		`{"command_id":"c1","target":"web-1","mode":"poll","priority":"normal","max_retries":"ten"}`,
		`{"command_id":"c1","target":"web-1","mode":"poll","priority":"normal","extra":1}`,
		`{"command_id":"c1","target":"web-1","mode":"poll","priority":"normal"} trailing`,
		`{"command_id":"c1","target":"web-1","mode":"poll","priority":"normal"}{}`,
		`{}`, `null`, `[]`, `"x"`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := broker.DecodeNudge(body)
		if err != nil {
			msg := err.Error()
			require.True(t, strings.HasPrefix(msg, "nudge: ") || strings.HasPrefix(msg, "decoding nudge: "),
				"a refusal that does not say what it was decoding: %q", msg)
			if rest, ok := strings.CutPrefix(msg, "nudge: "); ok {
				require.True(t, startsWithAny(rest, nudgeFields), "a refusal that names no field: %q", msg)
			}
			require.Equal(t, broker.Nudge{}, n)
			return
		}
		require.True(t, json.Valid(body), "accepted a body that is not one JSON value: %q", body)
		require.NotEmpty(t, n.CommandID)
		require.NotEmpty(t, n.Target)
		require.Contains(t, []string{"poll", "listen"}, n.Mode)
		require.Contains(t, []string{"high", "normal", "low"}, n.Priority)
		require.GreaterOrEqual(t, n.MaxRetries, 0)
		js, err := json.Marshal(n)
		require.NoError(t, err)
		again, err := broker.DecodeNudge(js)
		require.NoError(t, err)
		require.Equal(t, n, again)
	})
}

func startsWithAny(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
