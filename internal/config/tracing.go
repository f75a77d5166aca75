package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Tracing is the [tracing] section of every process: where its OpenTelemetry spans go.
// Tracing is off while Endpoint is empty, the default. The section keeps its own
// defaults and checks (ServiceNameOr, Ratio, Validate) so that it stays one field of
// each process's configuration.
type Tracing struct {
	// Endpoint is the OTLP/HTTP traces URL of a collector, for example
	// http://127.0.0.1:4318/v1/traces; an http:// URL is sent in plaintext. Empty
	// turns tracing off. Headers for the collector (an API key) come from the standard
	// OTEL_EXPORTER_OTLP_HEADERS variable.
	Endpoint string `toml:"endpoint"`
	// SampleRatio is the fraction of new traces recorded, from 0 to 1; empty means 1.
	// The sampler follows the parent's decision, so one deployment is sampled whole.
	SampleRatio Ratio `toml:"sample_ratio"`
	// ServiceName names the process in the traces; empty means the process's
	// default (mantis-mandible, mantis-thorax, mantis-agent).
	ServiceName string `toml:"service_name"`
}

// Enabled reports whether spans are exported.
func (t Tracing) Enabled() bool { return t.Endpoint != "" }

// ServiceNameOr returns ServiceName, or def when it is empty.
func (t Tracing) ServiceNameOr(def string) string {
	if t.ServiceName != "" {
		return t.ServiceName
	}
	return def
}

// Validate reports every problem of the section, each naming its key.
func (t Tracing) Validate() error {
	var errs []error
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, &FieldError{Key: "tracing.endpoint", Problem: "must be an http:// or https:// URL"})
		}
	}
	if _, err := t.SampleRatio.Value(); err != nil {
		errs = append(errs, &FieldError{Key: "tracing.sample_ratio", Problem: err.Error()})
	}
	return errors.Join(errs...)
}

// Ratio is a fraction from 0 to 1, read from a TOML number or string and from the
// environment; empty means 1.
type Ratio string

// UnmarshalText reads a ratio such as 0.25.
func (r *Ratio) UnmarshalText(text []byte) error {
	v := Ratio(strings.TrimSpace(string(text)))
	if _, err := v.Value(); err != nil {
		return err
	}
	*r = v
	return nil
}

// Value returns the ratio as a number: 1 when empty.
func (r Ratio) Value() (float64, error) {
	if r == "" {
		return 1, nil
	}
	v, err := strconv.ParseFloat(string(r), 64)
	if err != nil || v < 0 || v > 1 {
		return 0, fmt.Errorf("must be a number from 0 to 1, got %q", string(r))
	}
	return v, nil
}
