package httpapi_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

const (
	codecToken = "codec-test-token-0123456789"
	uiOrigin   = "http://127.0.0.1:8233"
)

type codecSetup struct {
	srv   *httptest.Server
	codec *codec.Codec
	keys  *apitoken.Keyring
}

// codecTokens are the tokens the codec endpoint of setupCodec admits: codecToken,
// named ops.
func codecTokens() []apitoken.Token {
	return []apitoken.Token{{Name: "ops", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash(codecToken)}}
}

// newTestCodec is a codec with one random key, k1.
func newTestCodec(t *testing.T) *codec.Codec {
	t.Helper()
	k := make([]byte, codec.KeySize)
	_, err := rand.Read(k)
	require.NoError(t, err)
	c, err := codec.New("k1", map[string][]byte{"k1": k})
	require.NoError(t, err)
	return c
}

func setupCodec(t *testing.T) codecSetup {
	t.Helper()
	c := newTestCodec(t)
	keys := apitoken.NewKeyring(codecTokens())
	h := httpapi.NewCodecEndpoint(httpapi.CodecOptions{
		Codec:      c,
		Keys:       keys,
		UIURL:      uiOrigin + "/namespaces/default",
		SessionKey: c.DeriveKey("session"),
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return codecSetup{srv: srv, codec: c, keys: keys}
}

// sealedBody is a /codec/decode request body holding one sealed payload of plain.
func (s codecSetup) sealedBody(t *testing.T, plain string) []byte {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(plain)
	require.NoError(t, err)
	sealed, err := s.codec.Encode([]*commonpb.Payload{p})
	require.NoError(t, err)
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	require.NoError(t, err)
	require.NotContains(t, string(b), plain)
	return b
}

func (s codecSetup) decode(t *testing.T, body []byte, mutate func(*http.Request)) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/codec/decode", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	mutate(req)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func decodedString(t *testing.T, resp *http.Response) string {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Payloads []json.RawMessage `json:"payloads"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Payloads, 1)
	var p commonpb.Payload
	require.NoError(t, protojson.Unmarshal(out.Payloads[0], &p))
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(&p, &s))
	return s
}

func TestCodecEndpointDecodesForABearerToken(t *testing.T) {
	t.Parallel()
	s := setupCodec(t)
	body := s.sealedBody(t, "echo deploy-spec")
	resp := s.decode(t, body, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+codecToken) })
	require.Equal(t, "echo deploy-spec", decodedString(t, resp))

	for name, mutate := range map[string]func(*http.Request){
		"no credentials": func(*http.Request) {},
		"wrong token":    func(r *http.Request) { r.Header.Set("Authorization", "Bearer not-a-token-of-ours") },
		"forged session": func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: httpapi.SessionCookie, Value: "b3Bz|99999999999|forged"})
		},
	} {
		resp := s.decode(t, body, mutate)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
	}
}

func TestCodecEndpointDecodesForASignedInUI(t *testing.T) {
	t.Parallel()
	s := setupCodec(t)

	resp, err := postSignIn(s.srv.URL, s.srv.URL, "wrong-token-wrong-token")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, resp.Cookies())

	resp, err = postSignIn(s.srv.URL, s.srv.URL, codecToken)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == httpapi.SessionCookie {
			session = c
		}
	}
	require.NotNil(t, session)
	require.True(t, session.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, session.SameSite)
	require.NotContains(t, session.Value, codecToken)

	// What the Web UI sends: its origin, the cookie, no Authorization.
	body := s.sealedBody(t, "echo deploy-spec")
	resp = s.decode(t, body, func(r *http.Request) {
		r.Header.Set("Origin", uiOrigin)
		r.AddCookie(session)
	})
	require.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
	require.Equal(t, "echo deploy-spec", decodedString(t, resp))

	// The same cookie from another origin is refused.
	resp = s.decode(t, body, func(r *http.Request) {
		r.Header.Set("Origin", "http://evil.example")
		r.AddCookie(session)
	})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

func TestCodecEndpointPreflightAdmitsOnlyTheUIOrigin(t *testing.T) {
	t.Parallel()
	s := setupCodec(t)
	preflight := func(origin string) *http.Response {
		req, err := http.NewRequest(http.MethodOptions, s.srv.URL+"/codec/decode", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := preflight(uiOrigin)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-namespace")

	resp = preflight("http://127.0.0.1:9999")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

func TestCodecEndpointPassesPlainPayloadsThrough(t *testing.T) {
	t.Parallel()
	s := setupCodec(t)
	p, err := converter.GetDefaultDataConverter().ToPayload("plain input")
	require.NoError(t, err)
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
	require.NoError(t, err)
	resp := s.decode(t, b, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+codecToken) })
	require.Equal(t, "plain input", decodedString(t, resp))
}

// signIn posts secret to the sign-in page and returns the session cookie it sets.
func (s codecSetup) signIn(t *testing.T, secret string) *http.Cookie {
	t.Helper()
	resp, err := postSignIn(s.srv.URL, s.srv.URL, secret)
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

// A session cookie is only as good as its token: once the token is removed from
// the keyring (a token file re-read on SIGHUP), or its secret replaced under the
// same name, the cookie decodes nothing, although it is well signed and unexpired.
func TestCodecSessionEndsWhenItsTokenIsRevoked(t *testing.T) {
	t.Parallel()
	s := setupCodec(t)
	body := s.sealedBody(t, "echo deploy-spec")
	session := s.signIn(t, codecToken)
	fromUI := func(r *http.Request) {
		r.Header.Set("Origin", uiOrigin)
		r.AddCookie(session)
	}
	require.Equal(t, "echo deploy-spec", decodedString(t, s.decode(t, body, fromUI)))

	// The same name with another secret: the old sign-in no longer counts.
	const rotated = "codec-test-token-rotated-9876543210"
	s.keys.Replace([]apitoken.Token{{Name: "ops", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash(rotated)}})
	require.Equal(t, http.StatusUnauthorized, s.decode(t, body, fromUI).StatusCode, "secret replaced")

	s.keys.Replace(nil)
	require.Equal(t, http.StatusUnauthorized, s.decode(t, body, fromUI).StatusCode, "token removed")
	resp := s.decode(t, body, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+codecToken) })
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "bearer of the removed token")
	resp, err := postSignIn(s.srv.URL, s.srv.URL, codecToken)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "signing in again with the removed token")

	// Put back, the token's sessions work again: the cookie names the token, and
	// the keyring decides.
	s.keys.Replace(codecTokens())
	require.Equal(t, "echo deploy-spec", decodedString(t, s.decode(t, body, fromUI)))
}
