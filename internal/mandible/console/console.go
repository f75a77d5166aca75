// Package console is the operator's web console that Mandible serves under /ui:
// html/template pages, a little vanilla JavaScript and CSS, all embedded. The pages
// hold no data of their own: their script reads the HTTP API and the event streams
// with the console's session cookie (httpapi.Sessions), so the console can do
// nothing the API would not let its token do, and it never reads the database.
package console

import (
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// Paths of the console.
const (
	// Prefix is where the console is served.
	Prefix = "/ui"
	// SignInPath and SignOutPath take the API token and end the session.
	SignInPath  = Prefix + "/signin"
	SignOutPath = Prefix + "/signout"
	// StaticPrefix serves the embedded script and style sheet.
	StaticPrefix = Prefix + "/static/"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Options wire the console to the API's sessions and keyring.
type Options struct {
	// Sessions issues and checks the console's session cookie; the API given the
	// same Sessions accepts it.
	Sessions *httpapi.Sessions
	// Keys are the API tokens a sign-in may present.
	Keys   *apitoken.Keyring
	Logger *slog.Logger
	// AuthLimiter refuses a sign-in from an address that failed too many lately;
	// share the API's (a limiter of its own when nil).
	AuthLimiter *httpapi.AuthLimiter
}

// page is what every page template is given.
type page struct {
	Title string
	// Page names the page for the script (data-page).
	Page  string
	Token apitoken.Token
	// CSRF is the session's CSRF token, in a meta tag for the script and in forms.
	CSRF string
	// Problem is a refusal to show (sign-in).
	Problem string
	// ID is the deployment of the deployment page.
	ID string
	// Next is where a sign-in goes on to.
	Next                    string
	Prefix, SignIn, SignOut string
}

type console struct {
	opts  Options
	pages map[string]*template.Template
}

// New returns the console's handler; mount it at Prefix and Prefix+"/".
func New(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.AuthLimiter == nil {
		opts.AuthLimiter = httpapi.NewAuthLimiter(httpapi.AuthLimit{})
	}
	c := &console{opts: opts, pages: parsePages()}
	static, _ := fs.Sub(staticFiles, "static")
	mux := http.NewServeMux()
	mux.Handle("GET "+StaticPrefix, http.StripPrefix(StaticPrefix, staticHandler(http.FileServerFS(static))))
	mux.HandleFunc("GET "+SignInPath, c.signInForm)
	mux.HandleFunc("POST "+SignInPath, c.signIn)
	mux.HandleFunc("POST "+SignOutPath, c.signOut)
	mux.HandleFunc("GET "+Prefix, redirectTo(Prefix+"/"))
	for path, name := range map[string]string{
		Prefix + "/{$}":              "deployments",
		Prefix + "/deployments/new":  "new",
		Prefix + "/deployments/{id}": "deployment",
		Prefix + "/targets":          "targets",
		Prefix + "/queue":            "queue",
		Prefix + "/dlq":              "dlq",
	} {
		mux.HandleFunc("GET "+path, c.signedIn(name))
	}
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "notfound", page{Title: "Not found"})
	})
	return securityHeaders(mux)
}

// parsePages parses each page template with the layout.
func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range []string{"signin", "deployments", "new", "deployment", "targets", "queue", "dlq", "notfound"} {
		out[name] = template.Must(template.ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html"))
	}
	return out
}

// signedIn serves page name to a caller with a session; others go to the sign-in
// page, which brings them back.
func (c *console) signedIn(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, csrf, ok := c.opts.Sessions.Token(r)
		if !ok {
			http.Redirect(w, r, SignInPath+"?next="+url.QueryEscape(safeNext(r.URL.RequestURI())), http.StatusSeeOther)
			return
		}
		p := page{Page: name, Token: t, CSRF: csrf, Title: titles[name]}
		if name == "deployment" {
			id, err := uuid.Parse(r.PathValue("id"))
			if err != nil {
				c.render(w, r, http.StatusNotFound, "notfound", page{Title: "Not found", Token: t, CSRF: csrf})
				return
			}
			p.ID = id.String()
		}
		c.render(w, r, http.StatusOK, name, p)
	}
}

// titles are the pages' titles.
var titles = map[string]string{
	"deployments": "Deployments", "new": "New deployment", "deployment": "Deployment",
	"targets": "Targets and Thorax instances", "queue": "Dispatch queue", "dlq": "Dead-letter queue",
}

// render writes page name; a failure is logged with r's context, so the line
// carries the request's id and trace id.
func (c *console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Prefix, p.SignIn, p.SignOut = Prefix, SignInPath, SignOutPath
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := c.pages[name].ExecuteTemplate(w, "layout", p); err != nil {
		c.opts.Logger.ErrorContext(r.Context(), "rendering console page failed", "page", name, "err", err)
	}
}

// securityHeaders sets the headers every console answer carries.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.SetPageSecurityHeaders(w.Header())
		h.ServeHTTP(w, r)
	})
}

// staticHandler lets browsers keep the embedded files for a short while.
func staticHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=300")
		h.ServeHTTP(w, r)
	})
}

func redirectTo(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, path, http.StatusSeeOther) }
}
