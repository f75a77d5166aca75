package webhook

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/mantis-deploy/mantis/internal/api"
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
