package webhook

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"github.com/mantis-deploy/mantis/internal/contract/api"
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

// Problems returns every problem of w, each "field: problem", or none.
func Problems(w api.NewWebhook) []string {
	var out []string
	out = append(out, urlProblems(w.URL)...)
	if !w.AllowPrivateNetwork {
		out = append(out, privateURLProblems(w.URL)...)
	}
	if len(w.EventTypes) == 0 || len(w.EventTypes) > MaxEventTypes {
		out = append(out, fmt.Sprintf("event_types: between 1 and %d event types", MaxEventTypes))
	}
	for i, t := range w.EventTypes {
		if !eventTypePattern.MatchString(t) {
			out = append(out, fmt.Sprintf(`event_types[%d]: must be a deployment.* or step.* event type, or "deployment.*" or "step.*", got %.70q`, i, t))
		}
	}
	if n := len(w.Secret); n < MinSecretBytes || n > MaxSecretBytes {
		out = append(out, fmt.Sprintf("secret: between %d and %d bytes, got %d", MinSecretBytes, MaxSecretBytes, n))
	}
	return out
}

// privateURLProblems refuses, at once, a URL whose host is itself a non-public
// address or localhost, which a webhook without allow_private_network could never
// reach. A name is judged when a delivery connects (publicOnly), not here: what it
// resolves to now says nothing of what it will resolve to then.
func privateURLProblems(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return []string{"url: localhost is a loopback address: set allow_private_network to reach it"}
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if kind := nonPublic(addr); kind != "" {
			return []string{fmt.Sprintf("url: %s is a %s address: set allow_private_network to reach it", addr.Unmap(), kind)}
		}
	}
	return nil
}

// urlProblems refuses a URL that is not an absolute http(s) URL with a host.
func urlProblems(raw string) []string {
	if len(raw) > MaxURLBytes {
		return []string{fmt.Sprintf("url: at most %d bytes, got %d", MaxURLBytes, len(raw))}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return []string{"url: not a URL"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return []string{fmt.Sprintf("url: must be http:// or https://, got scheme %.20q", u.Scheme)}
	}
	if u.Host == "" || strings.ContainsAny(raw, " \t\r\n") {
		return []string{"url: needs a host and no spaces"}
	}
	if u.User != nil {
		return []string{"url: must not carry credentials; the signature authenticates Mantis"}
	}
	return nil
}
