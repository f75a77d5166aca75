package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// A console session's state-changing call with a form body is read for its CSRF field
// before any handler bounds the body: 64 MiB posted as a form is refused having read
// no more than a small form's bound, not net/http's 10 MB.
func TestSessionFormBodyIsReadBounded(t *testing.T) {
	t.Parallel()
	keys := apitoken.NewKeyring([]apitoken.Token{{Name: "ops", Scope: apitoken.ScopeDeploy, SHA256: apitoken.Hash(sessionSecret)}})
	sessions := httpapi.NewSessions([]byte("0123456789abcdef0123456789abcdef"), keys, 0)
	h := httpapi.New(httpapi.Options{Keyring: keys, Sessions: sessions, MaxBodyBytes: 4096})
	var read atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{ReadCloser: r.Body, read: &read}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec := httptest.NewRecorder()
	tok, _ := keys.Lookup(sessionSecret)
	sessions.Issue(rec, httptest.NewRequest(http.MethodPost, "/ui/signin", nil), tok)
	cookie := rec.Result().Cookies()[0]

	addr := srv.Listener.Addr().String()
	status, answer := postHostileBody(t, addr, "/api/v1/dispatch-requests", false,
		"Cookie: "+cookie.Name+"="+cookie.Value+"\r\nOrigin: http://"+addr+"\r\nContent-Type: application/x-www-form-urlencoded\r\n")
	require.LessOrEqual(t, read.Load(), int64(64<<10+1), "bytes of the form read")
	require.Equal(t, http.StatusForbidden, status, "%s", answer)
}
