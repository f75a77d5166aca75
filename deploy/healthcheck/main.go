// Command mantis-healthcheck is the container image's HEALTHCHECK: it GETs one
// health URL of the process in the same container and exits 0 on a 2xx answer, 1
// otherwise. The image is distroless (no shell, no curl), hence this probe.
//
// The URL is $MANTIS_HEALTHCHECK_URL, by default Mandible's /healthz on its default
// HTTP port; Thorax and agents serve /healthz on their [metrics] listen address.
// An https URL is verified against $MANTIS_HEALTHCHECK_CA_CERT when it is set (a
// Mandible serving HTTPS with a certificate of a private CA), else the system roots.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"
)

// Defaults of the probe.
const (
	URLEnv     = "MANTIS_HEALTHCHECK_URL"
	CACertEnv  = "MANTIS_HEALTHCHECK_CA_CERT"
	DefaultURL = "http://127.0.0.1:8080/healthz"
	timeout    = 3 * time.Second
)

func main() {
	client, err := httpClient(os.Getenv(CACertEnv))
	if err == nil {
		err = probe(context.Background(), client, healthURL())
	}
	if err != nil {
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

// httpClient trusts the CA certificate at caPath, or the system roots when it is empty.
func httpClient(caPath string) (*http.Client, error) {
	if caPath == "" {
		return http.DefaultClient, nil
	}
	pem, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("reading the health check's CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caPath)
	}
	tlsConf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}}, nil
}

func probe(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("building the health request for %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("probing %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probing %s: %s", url, resp.Status)
	}
	return nil
}
