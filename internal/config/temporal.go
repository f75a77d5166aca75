package config

import (
	"log/slog"
	"net/url"
	"time"
)

// Temporal is the Temporal frontend Mandible's worker and client use, how to reach it
// (TLS, a client certificate, an API key, or a profile of the Temporal client
// configuration file the temporal CLI shares) and the payload codec's keys.
type Temporal struct {
	// Address is the Temporal frontend, host:port.
	Address string `toml:"address"`
	// Namespace is the Temporal namespace of Mantis's workflows.
	Namespace string `toml:"namespace"`
	// UIURL, when set, is the Temporal Web UI that deployment answers link to. Its
	// origin is the only one the codec endpoint's CORS admits.
	UIURL string `toml:"ui_url"`
	// DeploymentTaskQueue is the task queue every replica's deployment worker polls
	// (default mantis-deployments). Installations sharing a namespace need their own.
	DeploymentTaskQueue string `toml:"deployment_task_queue"`

	// SearchAttributes says what Mandible does at start with the custom search
	// attributes it needs: "register" (the default) adds the missing ones through
	// the operator API and waits until the namespace accepts them; "check" only
	// checks that they exist, for a role without the operator API or Temporal
	// Cloud, and stops start-up naming the commands that add them.
	SearchAttributes string `toml:"search_attributes"`
	// SearchAttributesWait bounds the wait for a namespace to accept attributes just
	// registered (a real cluster's namespace cache takes up to ~10 s); default 60 s.
	SearchAttributesWait Duration `toml:"search_attributes_wait"`

	// Profile, when set, takes the connection (address, namespace, TLS, API key) from
	// that profile of the Temporal client configuration file, with the TEMPORAL_*
	// environment variables applied as the temporal CLI does; the connection keys
	// (ca_cert_path, cert_path, key_path, server_name, api_key) must then stay empty.
	Profile string `toml:"profile"`
	// ConfigFile is the Temporal client configuration file; empty means the CLI's
	// default ($XDG_CONFIG_HOME/temporalio/temporal.toml).
	ConfigFile string `toml:"config_file"`
	// TLS turns TLS on with the system's roots; setting CACertPath, CertPath or APIKey
	// turns it on too.
	TLS bool `toml:"tls"`
	// CACertPath is the CA that signs the frontend's certificate.
	CACertPath string `toml:"ca_cert_path"`
	// CertPath is the client certificate for mutual TLS, set together with KeyPath.
	CertPath string `toml:"cert_path"`
	// KeyPath is the private key of CertPath.
	KeyPath string `toml:"key_path"`
	// ServerName is the name the frontend's certificate must carry, when it is not
	// the address's host.
	ServerName string `toml:"server_name"`
	// APIKey is sent as a bearer credential on every call (Temporal Cloud API keys).
	APIKey string `toml:"api_key" secret:"true"`
	// APIKeyFile is a file holding APIKey.
	APIKeyFile string `toml:"api_key_file" secretfile:"api_key"`

	// CodecKeyFile is the payload codec's keyring: "<key id> <base64 key>" lines, the
	// first current. Empty (with CodecKeysDir empty) leaves payloads unencrypted.
	CodecKeyFile string `toml:"codec_key_file"`
	// CodecKeysDir holds one "<key id>.key" file per key (base64), instead of
	// CodecKeyFile.
	CodecKeysDir string `toml:"codec_keys_dir"`
	// CodecKeyID names the current key of CodecKeysDir; required when it holds
	// several.
	CodecKeyID string `toml:"codec_key_id"`
}

// Bounds of temporal.search_attributes_wait: the default covers a real cluster's
// namespace cache (up to ~10 s) several times over; the most keeps a misconfigured
// start-up from hanging for hours.
const (
	DefaultSearchAttributesWait = 60 * time.Second
	MaxSearchAttributesWait     = 30 * time.Minute
)

// What Mandible does with its search attributes at start (Temporal.SearchAttributes).
const (
	SearchAttributesRegister = "register"
	SearchAttributesCheck    = "check"
)

// CodecEnabled reports whether payloads are encrypted.
func (t Temporal) CodecEnabled() bool { return t.CodecKeyFile != "" || t.CodecKeysDir != "" }

// String returns the section with the API key redacted.
func (t Temporal) String() string { return render(t) }

// GoString is String, so that %#v does not print secrets either.
func (t Temporal) GoString() string { return render(t) }

// LogValue returns the section with the API key redacted.
func (t Temporal) LogValue() slog.Value { return logValue(t) }

func (t Temporal) validate(p *problems) {
	if t.Profile == "" {
		p.dialAddress("temporal.address", t.Address)
		p.required("temporal.namespace", t.Namespace, "required")
	} else {
		for _, kv := range [][2]string{
			{"temporal.ca_cert_path", t.CACertPath}, {"temporal.cert_path", t.CertPath},
			{"temporal.key_path", t.KeyPath}, {"temporal.server_name", t.ServerName}, {"temporal.api_key", t.APIKey},
		} {
			if kv[1] != "" {
				p.add(kv[0], "must be empty when temporal.profile is set: the profile describes the connection")
			}
		}
	}
	if t.ConfigFile != "" && t.Profile == "" {
		p.add("temporal.config_file", "is read only for a temporal.profile; set one")
	}
	if (t.CertPath == "") != (t.KeyPath == "") {
		p.add("temporal.cert_path", "cert_path and key_path are set together or not at all")
	}
	p.required("temporal.deployment_task_queue", t.DeploymentTaskQueue, "required")
	if t.SearchAttributes != SearchAttributesRegister && t.SearchAttributes != SearchAttributesCheck {
		p.add("temporal.search_attributes", "must be %q or %q, got %q", SearchAttributesRegister, SearchAttributesCheck, t.SearchAttributes)
	}
	// Positive like every duration (problems.durations); bounded here.
	if w := t.SearchAttributesWait.Duration; w > MaxSearchAttributesWait {
		p.add("temporal.search_attributes_wait", "must be at most %s, got %s", MaxSearchAttributesWait, w)
	}
	if t.CodecKeyFile != "" && t.CodecKeysDir != "" {
		p.add("temporal.codec_keys_dir", "set codec_key_file or codec_keys_dir, not both")
	}
	if t.CodecKeyID != "" && t.CodecKeysDir == "" {
		p.add("temporal.codec_key_id", "names a key of temporal.codec_keys_dir; set that too")
	}
	if t.UIURL != "" {
		if u, err := url.Parse(t.UIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("temporal.ui_url", "must be an http:// or https:// URL")
		}
	}
}

// LoadMandibleTemporal returns the [temporal] section of Mandible's configuration,
// loaded as LoadMandible loads it (the defaults, the file at path, the MANTIS_
// variables env returns, the section's secret files) but validated alone: for a tool
// that reaches Temporal as Mandible does (`mantisctl workflows replay-check`) on a host
// that need not hold Mandible's database, token or listener files.
func LoadMandibleTemporal(path string, env func(string) (string, bool)) (Temporal, error) {
	cfg := DefaultMandible()
	_, errs, err := load(&cfg, path, env)
	if err != nil {
		return Temporal{}, err
	}
	section := temporalSection{Temporal: cfg.Temporal}
	errs = append(errs, readSecretFiles(&section)...)
	var p problems
	section.Temporal.validate(&p)
	p.durations(section)
	if errs = append(errs, p.errs...); len(errs) > 0 {
		return Temporal{}, errs
	}
	return section.Temporal, nil
}

// temporalSection is the [temporal] section under its key, so that its problems name
// their keys as they are written in the file.
type temporalSection struct {
	Temporal Temporal `toml:"temporal"`
}
