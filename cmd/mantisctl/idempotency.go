package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

// idempotencyHeader is the HTTP header that carries a create request's idempotency
// key.
const idempotencyHeader = "Idempotency-Key"

// maxIdempotencyKey is the longest key a deployment stores.
const maxIdempotencyKey = 200

// idempotencyHelp documents the default key of `run` in `mantisctl --help`.
const idempotencyHelp = `Idempotency of run: in CI, run sends an idempotency key by default, so a retried
job step gets the deployment its first try created instead of a second one. The key is
the CI job's identity plus a hash of the run (command, targets, selector, priority,
timeout):
  GitHub Actions  GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT, GITHUB_JOB
  GitLab CI       CI_PIPELINE_ID, CI_JOB_ID
  Buildkite       BUILDKITE_BUILD_ID, BUILDKITE_JOB_ID
  Jenkins         BUILD_TAG
--idempotency-key KEY sets it; --idempotency-key '' sends none.`

// ciJobIdentity names the CI job mantisctl runs in, from its environment; "" outside
// a known CI.
func ciJobIdentity(getenv func(string) string) string {
	join := func(prefix string, keys ...string) string {
		id := prefix
		for _, k := range keys {
			id += "-" + getenv(k)
		}
		return id
	}
	switch {
	case getenv("GITHUB_RUN_ID") != "":
		return join("github", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_JOB")
	case getenv("CI_PIPELINE_ID") != "" && getenv("CI_JOB_ID") != "":
		return join("gitlab", "CI_PIPELINE_ID", "CI_JOB_ID")
	case getenv("BUILDKITE_BUILD_ID") != "":
		return join("buildkite", "BUILDKITE_BUILD_ID", "BUILDKITE_JOB_ID")
	case getenv("BUILD_TAG") != "":
		return join("jenkins", "BUILD_TAG")
	}
	return ""
}

// defaultIdempotencyKey is run's key in CI: the job's identity and a hash of what
// the run asks for, so two different runs of one job stay two deployments. Outside CI
// it is "".
func defaultIdempotencyKey(getenv func(string) string, d spec.Deployment) string {
	job := ciJobIdentity(getenv)
	if job == "" {
		return ""
	}
	d.Name, d.IdempotencyKey = "", "" // the name holds the time: a retry's differs
	body, _ := json.Marshal(d)
	sum := sha256.Sum256(body)
	key := job + "-run-" + hex.EncodeToString(sum[:8])
	if len(key) > maxIdempotencyKey {
		jobSum := sha256.Sum256([]byte(job))
		key = "ci-" + hex.EncodeToString(jobSum[:16]) + "-run-" + hex.EncodeToString(sum[:8])
	}
	return key
}

// withHeader is a copy of c that sends header name: value on every request.
func withHeader(c *apiclient.Client, name, value string) *apiclient.Client {
	cc := *c
	base := c.HTTP.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc.HTTP = &http.Client{Timeout: c.HTTP.Timeout, Transport: headerTransport{base: base, name: name, value: value}}
	return &cc
}

// headerTransport sets one header on each request it sends.
type headerTransport struct {
	base        http.RoundTripper
	name, value string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(t.name, t.value)
	return t.base.RoundTrip(r)
}
