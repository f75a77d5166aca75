package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// maxSignInBody bounds the sign-in form: a token and where to go next.
const maxSignInBody = 8 << 10

func (c *console) signInForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "signin", page{Title: "Sign in", Page: "signin", Next: safeNext(r.URL.Query().Get("next"))})
}

// signIn takes an API token from the form and sets the console's session cookie.
// Only a form posted from this server's own pages is taken (the Origin check), so
// another site cannot sign a browser in under its own token.
func (c *console) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBody)
	if err := r.ParseForm(); err != nil {
		c.refuseSignIn(w, r, http.StatusBadRequest, "the sign-in form could not be read (at most 8 KiB)", "")
		return
	}
	next := safeNext(r.PostFormValue("next"))
	if !httpapi.SameOrigin(r) {
		c.refuseSignIn(w, r, http.StatusForbidden, "sign in from this server's own sign-in page", next)
		return
	}
	if c.opts.AuthLimiter.Held(w, r) {
		c.refuseSignIn(w, r, http.StatusTooManyRequests,
			"too many failed sign-ins from this address; try again in "+w.Header().Get("Retry-After")+" s", next)
		return
	}
	secret := strings.TrimSpace(r.PostFormValue("token"))
	t, ok := c.opts.Keys.Lookup(secret)
	if secret == "" || !ok {
		c.opts.AuthLimiter.Fail(r)
		c.refuseSignIn(w, r, http.StatusUnauthorized, "unknown API token", next)
		return
	}
	c.opts.Sessions.Issue(w, r, t)
	c.opts.Logger.InfoContext(r.Context(), "console signed in", "token", t.Name, "scope", t.Scope)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *console) refuseSignIn(w http.ResponseWriter, r *http.Request, status int, problem, next string) {
	c.opts.Logger.WarnContext(r.Context(), "console sign-in refused", "problem", problem)
	c.render(w, r, status, "signin", page{Title: "Sign in", Page: "signin", Problem: problem, Next: next})
}

// signOut ends the session; the form carries the session's CSRF token.
func (c *console) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInBody)
	t, csrf, ok := c.opts.Sessions.Token(r)
	if ok {
		if err := httpapi.CheckWrite(r, csrf); err != nil {
			c.opts.Logger.WarnContext(r.Context(), "console sign-out refused", "token", t.Name, "err", err)
			http.Error(w, "sign-out refused: "+err.Error(), http.StatusForbidden)
			return
		}
		c.opts.Logger.InfoContext(r.Context(), "console signed out", "token", t.Name)
	}
	c.opts.Sessions.Clear(w, r)
	http.Redirect(w, r, SignInPath, http.StatusSeeOther)
}

// safeNext keeps a sign-in's destination inside the console: anything else goes to
// the deployments page.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if next == "" || err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, Prefix+"/") ||
		strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix + "/"
	}
	return u.RequestURI()
}
