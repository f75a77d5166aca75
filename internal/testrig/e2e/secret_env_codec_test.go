package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// secretUIURL is the Temporal Web UI the secret cluster's Mandible names
// (temporal.ui_url): the codec endpoint admits its origin only.
const secretUIURL = "http://127.0.0.1:8233"

// startInput returns the input payloads of a deployment workflow's start event, as
// Temporal stores them: read without the codec.
func startInput(t *testing.T, id string) []*commonpb.Payload {
	t.Helper()
	tsrv := testenv.TemporalServer(t)
	tc, err := client.Dial(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	defer tc.Close()
	iter := tc.GetWorkflowHistory(context.Background(), "deployment:"+id, "", false, 0)
	require.True(t, iter.HasNext(), "the deployment has a history")
	first, err := iter.Next()
	require.NoError(t, err)
	started := first.GetWorkflowExecutionStartedEventAttributes()
	require.NotNil(t, started, "the first event starts the workflow")
	return started.GetInput().GetPayloads()
}

// requireSealedInput checks that every input payload of the start event is the
// codec's ciphertext, holding none of plain in its bytes.
func requireSealedInput(t *testing.T, payloads []*commonpb.Payload, plain ...string) {
	t.Helper()
	require.NotEmpty(t, payloads, "the deployment workflow has an input")
	for i, p := range payloads {
		require.Equal(t, codec.Encoding, string(p.GetMetadata()[converter.MetadataEncoding]),
			"start input payload %d is sealed by the codec", i)
		require.NotEmpty(t, p.GetMetadata()[codec.MetadataKeyID], "start input payload %d names its key", i)
		for _, s := range plain {
			require.NotContains(t, string(p.GetData()), s, "start input payload %d holds %q in clear", i, s)
		}
	}
}

// codecCall posts payloads to a replica's codec decode endpoint, changed by mutate
// (credentials, Origin), and returns the status and the decoded payloads' data.
func codecCall(t *testing.T, r *replica, payloads []*commonpb.Payload, mutate func(*http.Request)) (int, string) {
	t.Helper()
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://"+r.HTTPAddr+httpapi.CodecPrefix+"/decode", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", testenv.TemporalServer(t).Namespace)
	mutate(req)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ""
	}
	var out struct {
		Payloads []json.RawMessage `json:"payloads"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	var data strings.Builder
	for _, raw := range out.Payloads {
		var p commonpb.Payload
		require.NoError(t, protojson.Unmarshal(raw, &p))
		require.NotEqual(t, codec.Encoding, string(p.GetMetadata()[converter.MetadataEncoding]), "the endpoint decoded the payload")
		data.Write(p.GetData())
	}
	return resp.StatusCode, data.String()
}

// signIn posts the API token to a replica's sign-in page and returns the codec
// session cookie it sets.
func signIn(t *testing.T, r *replica) *http.Cookie {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+r.HTTPAddr+httpapi.SignInPath, strings.NewReader(url.Values{"token": {apiToken}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+r.HTTPAddr) // the sign-in page's own origin, as a browser sends it
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, c := range resp.Cookies() {
		if c.Name == httpapi.SessionCookie {
			return c
		}
	}
	require.FailNow(t, "the sign-in set no session cookie")
	return nil
}

// requireCodecEndpointDecodes checks the replica's codec endpoint as the Temporal
// Web UI and CLI use it, on the real start input of a deployment: with a bearer
// token, and with the sign-in page's cookie from the UI's origin, it gives back
// the plain input (want); without credentials it answers 401.
func requireCodecEndpointDecodes(t *testing.T, r *replica, payloads []*commonpb.Payload, want []string, secrets []string) {
	t.Helper()
	code, _ := codecCall(t, r, payloads, func(*http.Request) {})
	require.Equal(t, http.StatusUnauthorized, code, "no credentials")
	code, _ = codecCall(t, r, payloads, func(req *http.Request) { req.Header.Set("Origin", secretUIURL) })
	require.Equal(t, http.StatusUnauthorized, code, "the UI's origin, but no credentials")

	code, bearer := codecCall(t, r, payloads, func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+apiToken) })
	require.Equal(t, http.StatusOK, code, "bearer token")
	session := signIn(t, r)
	code, cookie := codecCall(t, r, payloads, func(req *http.Request) {
		req.Header.Set("Origin", secretUIURL)
		req.AddCookie(session)
	})
	require.Equal(t, http.StatusOK, code, "the UI's origin with the session cookie")
	for name, decoded := range map[string]string{"bearer": bearer, "session": cookie} {
		for _, w := range want {
			require.Contains(t, decoded, w, "decoded for the %s caller", name)
		}
		requireNoSecret(t, "the codec endpoint's answer", decoded, secrets)
	}
	code, _ = codecCall(t, r, payloads, func(req *http.Request) {
		req.Header.Set("Origin", "http://evil.example")
		req.AddCookie(session)
	})
	require.Equal(t, http.StatusForbidden, code, "the session cookie from another origin")
}
