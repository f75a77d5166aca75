package main

import (
	"maps"

	"github.com/mantis-deploy/mantis/internal/config"
)

// The shipped broker's client pair and CA, as deploy/compose and the Ansible role
// lay them out.
const (
	sampleCA         = `"/etc/mantis/certs/ca.crt"`
	sampleBrokerCert = `"/etc/mantis/certs/rabbitmq-client-cert.pem"`
	sampleBrokerKey  = `"/etc/mantis/certs/rabbitmq-client-key.pem"`
)

// tracingExamples are the [tracing] examples of every sample.
func tracingExamples(service string, m map[string]string) map[string]string {
	m["tracing.endpoint"] = `"http://127.0.0.1:4318/v1/traces"`
	m["tracing.sample_ratio"] = "0.25"
	m["tracing.service_name"] = `"` + service + `"`
	return m
}

// daemons are the three processes, with their pages and samples.
func daemons() []daemon {
	return []daemon{mandibleDaemon(), thoraxDaemon(), agentDaemon()}
}

func mandibleDaemon() daemon {
	return daemon{
		Name: "mandible", Title: "Mandible configuration reference",
		Intro:  "Every key of `mandible.toml`, the configuration of Mandible, the control plane (`mandible --config mandible.toml`).",
		Config: config.DefaultMandible(),
		Defaults: map[string]string{
			"replica_id":        "`<hostname>-<pid>`, computed at start",
			"database.url":      "required (or `database.url_file`)",
			"http.token_file":   "required (or the deprecated `http.tokens`)",
			"grpc.ca_cert_path": "required unless `grpc.insecure`",
			"grpc.cert_path":    "required unless `grpc.insecure`",
			"grpc.key_path":     "required unless `grpc.insecure`",
		},
		Samples: []sample{{
			File: "mandible.toml",
			Header: "Mandible, the control plane: every key, with its default unless a sample value is " +
				"needed. Keys left commented out have no default and show an example. Check a copy " +
				"with `mandible check-config --config mandible.toml`. Keep secrets (the database " +
				"URL's password, the broker password, the model key) in the environment or in the " +
				"*_file keys' files, readable by Mandible's user only.",
			Values: map[string]string{
				"database.url":           `"postgres://mantis@127.0.0.1:5432/mantis"`,
				"http.token_file":        `"/etc/mantis/tokens.toml"`,
				"grpc.ca_cert_path":      sampleCA,
				"grpc.cert_path":         `"/etc/mantis/certs/mandible.crt"`,
				"grpc.key_path":          `"/etc/mantis/certs/mandible.key"`,
				"queue.enabled":          "true",
				"queue.host":             `"localhost"`,
				"queue.username":         `"mantis"`,
				"queue.password":         `"<the mantis broker user's password>"`,
				"queue.ca_cert_path":     sampleCA,
				"queue.client_cert_path": sampleBrokerCert,
				"queue.client_key_path":  sampleBrokerKey,
			},
			Examples: tracingExamples("mantis-mandible", map[string]string{
				"replica_id":               `"mandible-1"`,
				"database.url_file":        `"/run/secrets/database_url"`,
				"database.direct_url":      `"postgres://mantis@db.internal:5432/mantis"`,
				"database.direct_url_file": `"/run/secrets/database_direct_url"`,
				"temporal.ui_url":          `"http://127.0.0.1:8233"`,
				"temporal.profile":         `"prod"`,
				"temporal.config_file":     `"/etc/mantis/temporal.toml"`,
				"temporal.ca_cert_path":    `"/etc/mantis/certs/temporal-ca.crt"`,
				"temporal.cert_path":       `"/etc/mantis/certs/temporal-client.crt"`,
				"temporal.key_path":        `"/etc/mantis/certs/temporal-client.key"`,
				"temporal.server_name":     `"temporal.internal"`,
				"temporal.api_key_file":    `"/run/secrets/temporal_api_key"`,
				"temporal.codec_key_file":  `"/etc/mantis/codec.keys"`,
				"temporal.codec_keys_dir":  `"/etc/mantis/codec-keys"`,
				"temporal.codec_key_id":    `"k2"`,
				"secrets.files_dir":        `"/etc/mantis/secrets"`,
				"http.cert_path":           `"/etc/mantis/certs/mandible-http.crt"`,
				"http.key_path":            `"/etc/mantis/certs/mandible-http.key"`,
				"http.tokens_file":         `"/run/secrets/api_tokens"`,
				"queue.password_file":      `"/run/secrets/broker_password"`,
				"thorax.scopes":            `{ "thorax-eu-1" = "web-eu-* region=eu" }`,
				"analysis.model_url":       `"https://models.internal/v1/chat/completions"`,
				"analysis.model_key_file":  `"/run/secrets/model_key"`,
				"analysis.model":           `"explainer"`,
				"debug.pprof_listen":       `"127.0.0.1:6060"`,
			}),
		}},
	}
}

func thoraxDaemon() daemon {
	return daemon{
		Name: "thorax", Title: "Thorax configuration reference",
		Intro:  "Every key of `thorax.toml`, the configuration of a Thorax instance, the execution tier (`thorax --config thorax.toml`).",
		Config: config.DefaultThorax(),
		Defaults: map[string]string{
			"name":                  "the host name, computed at start",
			"mandible.ca_cert_path": "required unless `mandible.insecure`",
			"mandible.cert_path":    "required unless `mandible.insecure`",
			"mandible.key_path":     "required unless `mandible.insecure`",
			"agents.ca_cert_path":   "required unless `agents.insecure`",
			"agents.cert_path":      "required unless `agents.insecure`",
			"agents.key_path":       "required unless `agents.insecure`",
		},
		Samples: []sample{{
			File: "thorax.toml",
			Header: "Thorax, the execution tier: every key, with its default unless a sample value is " +
				"needed. Keys left commented out have no default and show an example. Check a copy " +
				"with `thorax check-config --config thorax.toml`.",
			Values: map[string]string{
				"mandible.ca_cert_path":  sampleCA,
				"mandible.cert_path":     `"/etc/mantis/certs/thorax.crt"`,
				"mandible.key_path":      `"/etc/mantis/certs/thorax.key"`,
				"queue.enabled":          "true",
				"queue.host":             `"localhost"`,
				"queue.username":         `"mantis-thorax"`,
				"queue.password":         `"<the mantis-thorax broker user's password>"`,
				"queue.ca_cert_path":     sampleCA,
				"queue.client_cert_path": sampleBrokerCert,
				"queue.client_key_path":  sampleBrokerKey,
				"agents.ca_cert_path":    sampleCA,
				"agents.cert_path":       `"/etc/mantis/certs/thorax.crt"`,
				"agents.key_path":        `"/etc/mantis/certs/thorax.key"`,
			},
			Examples: tracingExamples("mantis-thorax", map[string]string{
				"name":                `"thorax-1"`,
				"queue.password_file": `"/run/secrets/broker_password"`,
				"metrics.listen":      `"127.0.0.1:9100"`,
			}),
		}},
	}
}

func agentDaemon() daemon {
	common := func(m map[string]string) map[string]string {
		m["labels"] = `{ "env" = "prod", "zone" = "a" }`
		m["exec.working_dir"] = `"/srv"`
		m["exec.pass_env"] = `["HTTPS_PROXY", "NO_PROXY"]`
		m["journal.dir"] = `"/var/lib/mantis/agent/web-1/journal"`
		m["metrics.listen"] = `"127.0.0.1:9101"`
		return tracingExamples("mantis-agent", m)
	}
	// Each mode's link: set in its own sample, shown commented out in the other's.
	thoraxLink := map[string]string{
		"thorax.address":      `"thorax.example.com:9190"`,
		"thorax.ca_cert_path": sampleCA,
		"thorax.cert_path":    `"/etc/mantis/certs/agent-web-1.crt"`,
		"thorax.key_path":     `"/etc/mantis/certs/agent-web-1.key"`,
	}
	listenLink := map[string]string{
		"listen.address":      `"0.0.0.0:9191"`,
		"listen.ca_cert_path": sampleCA,
		"listen.cert_path":    `"/etc/mantis/certs/agent-web-1.crt"`,
		"listen.key_path":     `"/etc/mantis/certs/agent-web-1.key"`,
	}
	const certHeader = " Its certificate names its target, spiffe://mantis/agent/<name> " +
		"(`mantisctl dev certs --issue agent/web-1` writes agent-web-1.crt and .key)."
	return daemon{
		Name: "agent", Title: "Agent configuration reference",
		Intro: "Every key of the agent's configuration (`agent --config agent.toml`), for both modes: a poll-mode " +
			"agent calls its Thorax (`[thorax]`), a listen-mode agent serves an endpoint its Thorax calls " +
			"(`[listen]`). Only the section of the configured mode is checked.",
		Config: config.DefaultAgent(),
		Defaults: map[string]string{
			"name":           "required",
			"mode":           "required",
			"thorax.address": "required in poll mode",
			"listen.address": "required in listen mode",
		},
		Samples: []sample{{
			File: "agent-poll.toml",
			Header: "An agent in poll mode: it calls its Thorax for work. Every key, with its default " +
				"unless a sample value is needed; keys left commented out show an example, and the " +
				"[listen] section, for the other mode, is commented out whole." + certHeader,
			Values:    with(map[string]string{"name": `"web-1"`, "mode": `"poll"`}, thoraxLink),
			Examples:  common(with(map[string]string{}, listenLink)),
			Commented: []string{"listen"},
		}, {
			File: "agent-listen.toml",
			Header: "An agent in listen mode: its Thorax calls it. Every key, with its default unless a " +
				"sample value is needed; keys left commented out show an example, and the [thorax] " +
				"section, for the other mode, is commented out whole." + certHeader,
			Values: with(map[string]string{"name": `"web-1"`, "mode": `"listen"`}, listenLink),
			Examples: common(with(map[string]string{
				"listen.allowed_client_names": `["thorax-1", "thorax-2"]`,
			}, thoraxLink)),
			Commented: []string{"thorax"},
		}},
	}
}

// with adds the pairs of more to m and returns it.
func with(m, more map[string]string) map[string]string {
	maps.Copy(m, more)
	return m
}
