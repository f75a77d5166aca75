package api

import (
	"net/http"
	"strings"
)

// probedMethods are the methods AllowedMethods asks a mux about, in the order the
// Allow header lists them.
var probedMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
}

// AllowedMethods returns the methods mux routes r's path with to a pattern other
// than catchAll. A mux that ends in a catch-all pattern ("/api/") never answers 405
// itself, so its catch-all asks this to tell a wrong method from an unknown path.
func AllowedMethods(mux *http.ServeMux, r *http.Request, catchAll string) []string {
	var allow []string
	for _, m := range probedMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != catchAll {
			allow = append(allow, m)
		}
	}
	return allow
}

// WriteMethodNotAllowed answers r with 405, a CodeMethodNotAllowed problem, and an
// Allow header listing allow.
func WriteMethodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	WriteError(w, r, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
		r.Method+" "+r.URL.Path+" is not allowed; it takes "+strings.Join(allow, ", "))
}

// WriteNotFoundOrMethod is the catch-all of a mux: 405 when another method of r's
// path is routed, 404 otherwise.
func WriteNotFoundOrMethod(w http.ResponseWriter, r *http.Request, mux *http.ServeMux, catchAll string) {
	if allow := AllowedMethods(mux, r, catchAll); len(allow) > 0 {
		WriteMethodNotAllowed(w, r, allow)
		return
	}
	WriteError(w, r, http.StatusNotFound, CodeNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
}
