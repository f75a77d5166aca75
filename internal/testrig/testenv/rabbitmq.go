package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// Broker is a TLS-only RabbitMQ with a vhost of the test's own.
type Broker struct {
	Host          string
	Port          int
	VHost         string
	User          string
	Password      string
	CACert        string
	ClientCert    string
	ClientKey     string
	ManagementURL string
	management    *http.Client
}

// URL is the amqps URL of the test's vhost.
func (b Broker) URL() string {
	return fmt.Sprintf("amqps://%s:%s@%s:%d/%s", b.User, url.QueryEscape(b.Password), b.Host, b.Port, url.PathEscape(b.VHost))
}

// TLSConfig trusts the broker's CA and presents the client certificate.
func (b Broker) TLSConfig(t testing.TB) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(b.CACert)
	if err != nil {
		t.Fatalf("testenv: reading CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	pair, err := tls.LoadX509KeyPair(b.ClientCert, b.ClientKey)
	if err != nil {
		t.Fatalf("testenv: loading client pair: %v", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

// Management calls the broker's HTTPS management API and returns the body; a status of
// 300 or more is an error.
func (b Broker) Management(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.ManagementURL+"/api"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(b.User, b.Password)
	req.Header.Set("content-type", "application/json")
	resp, err := b.management.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return out, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, out)
	}
	return out, nil
}

// RabbitMQ returns the shared broker with a fresh vhost for the test, deleted when the
// test ends.
func RabbitMQ(t testing.TB) Broker {
	t.Helper()
	e := env(t, "rabbitmq")
	port, _ := strconv.Atoi(e["MANTIS_AMQP_PORT"])
	b := Broker{
		Host: e["MANTIS_AMQP_HOST"], Port: port, User: e["RABBITMQ_USER"], Password: e["RABBITMQ_PASSWORD"],
		CACert: e["MANTIS_CA_CERT"], ClientCert: e["MANTIS_CLIENT_CERT"], ClientKey: e["MANTIS_CLIENT_KEY"],
		ManagementURL: e["RABBITMQ_MANAGEMENT_URL"],
	}
	mgmt, err := devstack.ManagementClient(b.CACert)
	if err != nil {
		t.Fatalf("testenv: management client: %v", err)
	}
	b.management = mgmt

	var r [6]byte
	_, _ = rand.Read(r[:])
	b.VHost = "/test-" + hex.EncodeToString(r[:])
	vh := url.PathEscape(b.VHost)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.Management(ctx, http.MethodPut, "/vhosts/"+vh, []byte(`{}`)); err != nil {
		t.Fatalf("testenv: creating vhost: %v", err)
	}
	if _, err := b.Management(ctx, http.MethodPut, "/permissions/"+vh+"/"+b.User,
		[]byte(`{"configure":".*","write":".*","read":".*"}`)); err != nil {
		t.Fatalf("testenv: permissioning vhost: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := b.Management(ctx, http.MethodDelete, "/vhosts/"+vh, nil); err != nil {
			t.Logf("testenv: deleting vhost %s: %v", b.VHost, err)
		}
	})
	return b
}
