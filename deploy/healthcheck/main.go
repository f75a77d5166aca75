// Command mantis-healthcheck is the container image's HEALTHCHECK: it GETs one
// health URL of the process in the same container and exits 0 on a 2xx answer, 1
// otherwise. The image is distroless (no shell, no curl), hence this probe.
//
// The URL is $MANTIS_HEALTHCHECK_URL, by default Mandible's /healthz on its default
// HTTP port; Thorax and agents serve /healthz on their [metrics] listen address.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"
)

// Defaults of the probe.
const (
	URLEnv     = "MANTIS_HEALTHCHECK_URL"
	DefaultURL = "http://127.0.0.1:8080/healthz"
	timeout    = 3 * time.Second
)

func main() {
	if err := probe(context.Background(), healthURL()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func healthURL() string {
	if u := os.Getenv(URLEnv); u != "" {
		return u
	}
	return DefaultURL
}

func probe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("building the health request for %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probing %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probing %s: %s", url, resp.Status)
	}
	return nil
}
