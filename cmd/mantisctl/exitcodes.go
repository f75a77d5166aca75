package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// The exit codes of mantisctl: a contract with the scripts and CI jobs that run it.
const (
	// ExitOK: the command succeeded (get and list succeed whatever the deployment's
	// state).
	ExitOK = 0
	// ExitFailed: the watched deployment failed (watch, deploy --watch, run), or any
	// error no other code names (an HTTP 500).
	ExitFailed = 1
	// ExitUsage: a bad command line or invalid input: bad flags or arguments, a spec
	// that does not validate, an unknown context, an id that names nothing, an HTTP
	// 400/404/413/422 answer.
	ExitUsage = 2
	// ExitCancelled: the watched deployment was cancelled, or mantisctl was interrupted
	// (SIGINT, SIGTERM).
	ExitCancelled = 3
	// ExitAuth: the API refused the token (HTTP 401 or 403).
	ExitAuth = 4
	// ExitUnreachable: the server could not be reached (connection refused, DNS, TLS
	// handshake, no answer, a proxy's 502/503/504).
	ExitUnreachable = 5
	// ExitTimedOut: the wait ended before the deployment did (watch --timeout, deploy
	// --watch-timeout, run --watch-timeout).
	ExitTimedOut = 6
)

// exitCodesHelp documents the exit codes in `mantisctl --help`.
const exitCodesHelp = `Exit codes:
  0  succeeded (get and list succeed whatever the deployment's state)
  1  the deployment failed (watch, deploy --watch, run), or another error (an HTTP 500)
  2  usage error or invalid input (bad flags or arguments, invalid spec, HTTP 400/404/413/422)
  3  the deployment was cancelled, or mantisctl was interrupted
  4  authentication or permission refused (HTTP 401/403)
  5  server unreachable (connection refused, DNS, TLS handshake, no answer, HTTP 502/503/504)
  6  timed out waiting (watch --timeout, deploy --watch-timeout, run --watch-timeout)`

// Errors that end a watch with their own exit code; the summary already said why.
var (
	errDeploymentFailed    = errors.New("deployment failed")
	errDeploymentCancelled = errors.New("deployment cancelled")
	errWatchTimedOut       = errors.New("timed out waiting for the deployment to end")
)

// usageError is a bad command line or invalid input found before calling the API.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// invalidInput marks err as the user's input being wrong (exit 2).
func invalidInput(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err: err}
}

// exitCodeOf is the one place that maps an error to mantisctl's exit code. started
// says whether the command's own code ran: an error before it is cobra's (unknown
// command or flag, wrong arguments, a required flag missing), a usage error.
func exitCodeOf(err error, started bool) int {
	var child exitCode
	var usage usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &child):
		return int(child) // dev exec passes its command's status on
	case !started, errors.As(err, &usage):
		return ExitUsage
	case errors.Is(err, errWatchTimedOut):
		return ExitTimedOut
	case errors.Is(err, errDeploymentCancelled), errors.Is(err, context.Canceled):
		return ExitCancelled
	case errors.Is(err, errDeploymentFailed):
		return ExitFailed
	}
	if code, ok := httpExitCode(err); ok {
		return code
	}
	if unreachable(err) {
		return ExitUnreachable
	}
	return ExitFailed
}

// httpExitCode maps an error answer of the API by its HTTP status.
func httpExitCode(err error) (int, bool) {
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) {
		return 0, false
	}
	switch apiErr.Status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return ExitUsage, true
	case http.StatusUnauthorized, http.StatusForbidden:
		return ExitAuth, true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return ExitUnreachable, true
	}
	return ExitFailed, true
}

// unreachable reports whether err is a failure to reach the server: to resolve,
// connect, complete the TLS handshake, or get an answer in time.
func unreachable(err error) bool {
	var (
		dnsErr    *net.DNSError
		opErr     *net.OpError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		certErr   x509.CertificateInvalidError
		verifyErr *tls.CertificateVerificationError
		recordErr tls.RecordHeaderError
		alertErr  tls.AlertError
		urlErr    *url.Error
	)
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &opErr),
		errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &certErr),
		errors.As(err, &verifyErr), errors.As(err, &recordErr), errors.As(err, &alertErr):
		return true
	case errors.As(err, &urlErr):
		return urlErr.Timeout()
	}
	return false
}
