package devstack

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	rabbitmqUser  = "rabbitmq" // the OS user the broker runs as when the supervisor is root
	rabbitmqVHost = "/mantis"
	brokerUser    = "mantis"
)

// rabbitmqPorts are the broker's listeners. Dist must stay below the ephemeral range,
// where the Temporal dev server binds its own random ports.
type rabbitmqPorts struct {
	AMQPS, Management, Dist, EPMD int
}

// startRabbitMQ runs a TLS-only broker (client certificate required) with the
// management plugin on HTTPS, and makes sure the mantis user and vhost exist.
func (s *Stack) startRabbitMQ(ctx context.Context, dir string, ports rabbitmqPorts, password string) error {
	server := "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if _, err := os.Stat(server); err != nil {
		return fmt.Errorf("rabbitmq-server: %w (install the rabbitmq-server package)", errNotFound)
	}
	files, err := s.writeRabbitMQFiles(dir, ports, password)
	if err != nil {
		return err
	}
	nodename := fmt.Sprintf("mantis%d@localhost", ports.AMQPS)
	env := rabbitmqEnv(dir, ports, nodename, files)
	s.rabbitmqEnv = env
	p, err := startProcess(s.logger, processSpec{
		Name: "rabbitmq", Path: server, Env: env, Dir: dir, RunAs: rabbitmqUser,
		LogPath: filepath.Join(s.opts.Dir, "logs", "rabbitmq.log"),
	})
	if err != nil {
		return err
	}
	s.track(p)
	s.epmdPort = ports.EPMD

	api := fmt.Sprintf("https://127.0.0.1:%d/api", ports.Management)
	mgmt, err := ManagementClient(s.Certs.CACert())
	if err != nil {
		return err
	}
	err = waitFor(ctx, p, 120*time.Second, func(ctx context.Context) error {
		return managementCall(ctx, mgmt, http.MethodGet, api+"/overview", password, nil)
	})
	if err != nil {
		return err
	}
	if err := s.prepareBroker(ctx, mgmt, api, password); err != nil {
		return err
	}
	s.exportBrokerEnv(ports, nodename, password)
	return nil
}

// rabbitmqFiles are the paths of the files the broker is started with.
type rabbitmqFiles struct {
	conf, plugins string
}

// writeRabbitMQFiles prepares the broker's directory: its sub-directories, copies of
// the certificates it serves with, its configuration and its plugins, all owned by
// the broker's user.
func (s *Stack) writeRabbitMQFiles(dir string, ports rabbitmqPorts, password string) (rabbitmqFiles, error) {
	for _, sub := range []string{"mnesia", "log", "home", "certs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
			return rabbitmqFiles{}, err
		}
	}
	// The broker runs unprivileged and cannot read the supervisor's keys: give it copies.
	certs := s.Certs
	caPath, certPath, keyPath := filepath.Join(dir, "certs", "ca.crt"), filepath.Join(dir, "certs", "server.crt"), filepath.Join(dir, "certs", "server.key")
	serverCert, serverKey := certs.Pair("rabbitmq")
	for src, dst := range map[string]string{certs.CACert(): caPath, serverCert: certPath, serverKey: keyPath} {
		if err := copyFile(src, dst, 0o600); err != nil {
			return rabbitmqFiles{}, err
		}
	}
	conf := fmt.Sprintf(`# Written by mantisctl dev: TLS only, client certificates required.
listeners.tcp = none
listeners.ssl.default = 127.0.0.1:%[1]d
ssl_options.cacertfile = %[3]s
ssl_options.certfile = %[4]s
ssl_options.keyfile = %[5]s
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = true
management.ssl.ip = 127.0.0.1
management.ssl.port = %[2]d
management.ssl.cacertfile = %[3]s
management.ssl.certfile = %[4]s
management.ssl.keyfile = %[5]s
default_vhost = %[6]s
default_user = %[7]s
default_pass = %[8]s
default_user_tags.administrator = true
default_permissions.configure = .*
default_permissions.read = .*
default_permissions.write = .*
loopback_users = none
log.console = true
log.console.level = warning
log.file = false
`, ports.AMQPS, ports.Management, caPath, certPath, keyPath, rabbitmqVHost, brokerUser, password)
	files := rabbitmqFiles{conf: filepath.Join(dir, "rabbitmq.conf"), plugins: filepath.Join(dir, "enabled_plugins")}
	if err := os.WriteFile(files.conf, []byte(conf), 0o600); err != nil {
		return rabbitmqFiles{}, err
	}
	if err := os.WriteFile(files.plugins, []byte("[rabbitmq_management].\n"), 0o644); err != nil {
		return rabbitmqFiles{}, err
	}
	if err := chownTo(dir, rabbitmqUser); err != nil {
		return rabbitmqFiles{}, err
	}
	return files, nil
}

// rabbitmqEnv is the broker's environment: everything under dir, every listener on
// loopback.
func rabbitmqEnv(dir string, ports rabbitmqPorts, nodename string, files rabbitmqFiles) []string {
	return []string{
		"HOME=" + filepath.Join(dir, "home"),
		"RABBITMQ_NODENAME=" + nodename,
		"RABBITMQ_CONFIG_FILE=" + files.conf,
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + files.plugins,
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(ports.Dist),
		"ERL_EPMD_PORT=" + strconv.Itoa(ports.EPMD),
		// Loopback only, the port mapper and the distribution listener included.
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
		"RABBITMQ_LOGS=-",
	}
}

// prepareBroker makes sure of the vhost, the mantis user's permissions and the
// service users. default_* only applies to a fresh node: this runs on every start, so
// a reused data directory is repaired too.
func (s *Stack) prepareBroker(ctx context.Context, mgmt *http.Client, api, password string) error {
	vh := url.PathEscape(rabbitmqVHost)
	for _, call := range []struct{ path, body string }{
		{"/vhosts/" + vh, `{}`},
		{"/permissions/" + vh + "/" + brokerUser, `{"configure":".*","write":".*","read":".*"}`},
	} {
		if err := managementCall(ctx, mgmt, http.MethodPut, api+call.path, password, []byte(call.body)); err != nil {
			return fmt.Errorf("preparing broker %s: %w", call.path, err)
		}
	}
	return s.ensureServiceUsers(ctx, BrokerAdmin{Client: mgmt, API: api, User: brokerUser, Password: password})
}

// exportBrokerEnv publishes how to reach the broker in the stack's environment.
func (s *Stack) exportBrokerEnv(ports rabbitmqPorts, nodename, password string) {
	clientCert, clientKey := s.Certs.Pair("client")
	s.Env["MANTIS_AMQP_URL"] = fmt.Sprintf("amqps://%s:%s@127.0.0.1:%d/%s", brokerUser, url.QueryEscape(password), ports.AMQPS, url.PathEscape(rabbitmqVHost))
	s.Env["MANTIS_AMQP_HOST"] = "127.0.0.1"
	s.Env["MANTIS_AMQP_PORT"] = strconv.Itoa(ports.AMQPS)
	s.Env["MANTIS_AMQP_VHOST"] = rabbitmqVHost
	s.Env["RABBITMQ_MANAGEMENT_URL"] = fmt.Sprintf("https://127.0.0.1:%d", ports.Management)
	s.Env["RABBITMQ_USER"] = brokerUser
	s.Env["RABBITMQ_PASSWORD"] = password
	s.Env["RABBITMQ_NODENAME"] = nodename
	s.Env["MANTIS_CLIENT_CERT"] = clientCert
	s.Env["MANTIS_CLIENT_KEY"] = clientKey
}

// ManagementClient is an HTTPS client for the broker's management API that trusts
// the dev CA.
func ManagementClient(caPath string) (*http.Client, error) {
	pem, err := os.ReadFile(caPath)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caPath)
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

func managementCall(ctx context.Context, c *http.Client, method, url, password string, body []byte) error {
	return managementCallAs(ctx, c, method, url, brokerUser, password, body)
}

func managementCallAs(ctx context.Context, c *http.Client, method, url, user, password string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, password)
	req.Header.Set("content-type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// stopEPMD ends the Erlang port mapper the broker started: it outlives the node.
func (s *Stack) stopEPMD(ctx context.Context) {
	if s.epmdPort == 0 {
		return
	}
	_, _ = runAs(ctx, rabbitmqUser, s.rabbitmqEnv, "epmd", "-port", strconv.Itoa(s.epmdPort), "-kill")
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}
