package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/schema"
)

// The local stack's processes are configured by encoding internal/config's types,
// starting from each process's defaults: what is written is what config.Load* reads
// back, and a renamed key cannot drift from the file.

// Settings of the local stack that differ from the processes' defaults.
const (
	devReplicaID       = "local-1"
	devPollingInterval = 2 * time.Second
	devDrainTimeout    = 10 * time.Second
	devPrefetchCount   = 10
)

// configHeader heads every file dev up writes.
const configHeader = "# Written by mantisctl dev up for the local stack.\n"

// devFiles are the files of the local stack that the configurations name.
type devFiles struct {
	dir       string // the stack's directory
	certs     devcerts.Bundle
	codecKeys string
	tokenFile string
}

// queueOf is the [queue] section for a broker user of the stack's environment e.
func queueOf(e map[string]string, certs devcerts.Bundle, userKey, passwordKey string) (config.Queue, error) {
	port, err := strconv.Atoi(e["MANTIS_AMQP_PORT"])
	if err != nil {
		return config.Queue{}, fmt.Errorf("reading MANTIS_AMQP_PORT: %w", err)
	}
	return config.Queue{
		Enabled: true, Host: e["MANTIS_AMQP_HOST"], Port: port, Username: e[userKey], Password: e[passwordKey],
		VHost: e["MANTIS_AMQP_VHOST"], CACertPath: certs.CACert(), ClientCertPath: e["MANTIS_CLIENT_CERT"], ClientKeyPath: e["MANTIS_CLIENT_KEY"],
	}, nil
}

// mandibleDevConfig is mandible.toml for the local stack.
func mandibleDevConfig(e map[string]string, f devFiles) (config.Mandible, error) {
	c := config.DefaultMandible()
	c.ReplicaID = devReplicaID
	c.Database.URL = e["DATABASE_URL"]
	c.Temporal.Address, c.Temporal.Namespace, c.Temporal.UIURL = e["TEMPORAL_ADDRESS"], e["TEMPORAL_NAMESPACE"], e["TEMPORAL_UI_URL"]
	c.Temporal.CodecKeyFile = f.codecKeys
	c.HTTP.Listen, c.HTTP.TokenFile = devHTTPAddr, f.tokenFile
	cert, key := f.certs.Pair("mandible")
	c.GRPC = config.Listener{Listen: devGRPCAddr, TLS: config.TLS{CACertPath: f.certs.CACert(), CertPath: cert, KeyPath: key}}
	q, err := queueOf(e, f.certs, "MANTIS_AMQP_MANDIBLE_USER", "MANTIS_AMQP_MANDIBLE_PASSWORD")
	c.Queue = q
	return c, err
}

// thoraxDevConfig is thorax.toml for the local stack: Mandible over mTLS, the broker
// of the stack, a short polling tick, and the agents port with the same dev CA.
func thoraxDevConfig(e map[string]string, f devFiles) (config.Thorax, error) {
	c := config.DefaultThorax()
	c.Name = devThoraxName
	cert, key := f.certs.Issued(identity.RoleThorax, devThoraxName)
	tls := config.TLS{CACertPath: f.certs.CACert(), CertPath: cert, KeyPath: key}
	c.Mandible = config.Endpoint{Address: devGRPCAddr, TLS: tls}
	q, err := queueOf(e, f.certs, "MANTIS_AMQP_THORAX_USER", "MANTIS_AMQP_THORAX_PASSWORD")
	c.Queue.Queue, c.Queue.PrefetchCount = q, devPrefetchCount
	c.Polling.Interval = config.Duration{Duration: devPollingInterval}
	c.Agents.Listener = config.Listener{Listen: devThoraxAgentsAddr, TLS: tls}
	c.Drain.Timeout = config.Duration{Duration: devDrainTimeout}
	return c, err
}

// agentDevConfig is the configuration of the local agent name in mode: agent-poll
// calls Thorax's agents port, agent-listen serves Thorax alone.
func agentDevConfig(f devFiles, name, mode string) config.Agent {
	c := config.DefaultAgent()
	c.Name, c.Mode = name, mode
	cert, key := f.certs.Issued(identity.RoleAgent, name)
	tls := config.TLS{CACertPath: f.certs.CACert(), CertPath: cert, KeyPath: key}
	if mode == schema.ModeListen {
		c.Listen.Address, c.Listen.TLS = devListenAgentAddr, tls
	} else {
		c.Thorax = config.Endpoint{Address: devThoraxAgentsAddr, TLS: tls}
	}
	c.Journal.Dir = agentJournalDir(f.dir, name)
	return c
}

// agentJournalDir keeps a local agent's run journal with the rest of the stack's data.
func agentJournalDir(stackDir, name string) string {
	dir, err := filepath.Abs(filepath.Join(stackDir, "agents", name, "journal"))
	if err != nil {
		return filepath.Join(stackDir, "agents", name, "journal")
	}
	return dir
}

// encodeConfig is a process's configuration as a TOML file.
func encodeConfig(cfg any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(configHeader)
	if err := toml.NewEncoder(&b).Encode(cfg); err != nil {
		return nil, fmt.Errorf("encoding configuration: %w", err)
	}
	return b.Bytes(), nil
}

// writeConfig writes a process's configuration under <dir>/config; it holds secrets.
func writeConfig(stackDir, name string, content []byte) (string, error) {
	dir := filepath.Join(stackDir, "config")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, content, 0o600)
}

// writeTOML encodes cfg into <dir>/config/name.
func writeTOML(stackDir, name string, cfg any) (string, error) {
	b, err := encodeConfig(cfg)
	if err != nil {
		return "", err
	}
	return writeConfig(stackDir, name, b)
}
