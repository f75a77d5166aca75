package schema

import (
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/internal/domain"
)

// expiredText is the error a request past DispatchRequestTTL ends with.
var expiredText = "expired " + domain.DispatchRequestTTLText + " after creation"

// shortDuration prints d without the zero minutes and seconds time.Duration adds.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// InputError lists every problem with a request, each naming its field.
type InputError struct{ Problems []string }

func (e *InputError) Error() string {
	return "invalid request: " + strings.Join(e.Problems, "; ")
}
