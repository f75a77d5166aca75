package webhook

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// Bounds on a webhook.
const (
	MaxURLBytes    = 2048
	MaxEventTypes  = 32
	MinSecretBytes = 16
	MaxSecretBytes = 256
)

// eventTypePattern is what a webhook may ask for: a deployment.* or step.* event
// type, or all of one subject ("step.*"). target.* events are too many to post.
var eventTypePattern = regexp.MustCompile(`^(deployment|step)\.([a-z_]{1,64}|\*)$`)

// Problems returns every problem of w by field, or none.
func Problems(w api.NewWebhook) domain.Problems {
	var out domain.Problems
	if p := urlProblem(w.URL); p != "" {
		out.Add("url", p)
	}
	if p := privateURLProblem(w.URL); p != "" && !w.AllowPrivateNetwork {
		out.Add("url", p)
	}
	if len(w.EventTypes) == 0 || len(w.EventTypes) > MaxEventTypes {
		out.Addf("event_types", "between 1 and %d event types", MaxEventTypes)
	}
	for i, t := range w.EventTypes {
		if !eventTypePattern.MatchString(t) {
			out.Addf(fmt.Sprintf("event_types[%d]", i), `must be a deployment.* or step.* event type, or "deployment.*" or "step.*", got %.70q`, t)
		}
	}
	if n := len(w.Secret); n < MinSecretBytes || n > MaxSecretBytes {
		out.Addf("secret", "between %d and %d bytes, got %d", MinSecretBytes, MaxSecretBytes, n)
	}
	return out
}

// privateURLProblem refuses, at once, a URL whose host is itself a non-public
// address or localhost, which a webhook without allow_private_network could never
// reach; "" for any other. A name is judged when a delivery connects (publicOnly),
// not here: what it resolves to now says nothing of what it will resolve to then.
func privateURLProblem(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "localhost is a loopback address: set allow_private_network to reach it"
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if kind := nonPublic(addr); kind != "" {
			return fmt.Sprintf("%s is a %s address: set allow_private_network to reach it", addr.Unmap(), kind)
		}
	}
	return ""
}

// urlProblem refuses a URL that is not an absolute http(s) URL with a host; "" for
// one that is.
func urlProblem(raw string) string {
	if len(raw) > MaxURLBytes {
		return fmt.Sprintf("at most %d bytes, got %d", MaxURLBytes, len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "not a URL"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Sprintf("must be http:// or https://, got scheme %.20q", u.Scheme)
	}
	if u.Host == "" || strings.ContainsAny(raw, " \t\r\n") {
		return "needs a host and no spaces"
	}
	if u.User != nil {
		return "must not carry credentials; the signature authenticates Mantis"
	}
	return ""
}
