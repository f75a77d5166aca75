// Package temporalclient builds the Temporal client options of every Mantis process
// that dials Temporal, from the [temporal] section of its configuration, and exports
// the SDK's own metrics through Prometheus (metrics.go); its clients and workers carry
// trace context in workflow and activity headers (tracing.go).
//
// The connection is described through the Temporal SDK's own client configuration
// (go.temporal.io/sdk/contrib/envconfig): either a profile of the TOML file the temporal
// CLI shares, with its TEMPORAL_* environment variables, or the [temporal] keys turned
// into such a profile. The SDK then turns the profile into connection options (TLS, the
// client pair, the server name, the API key), so Mantis reads them as the CLI does.
package temporalclient

import (
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/config"
)

// Options returns the client options cfg describes, logging through logger. When cfg
// configures codec keys, the options' data converter encrypts every payload and the
// codec is returned too (nil otherwise).
func Options(cfg config.Temporal, logger *slog.Logger) (client.Options, *codec.Codec, error) {
	prof, err := profile(cfg)
	if err != nil {
		return client.Options{}, nil, err
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, nil, fmt.Errorf("building the Temporal connection: %w", err)
	}
	opts.Logger = Logger(logger)
	tracing, err := tracingInterceptor()
	if err != nil {
		return client.Options{}, nil, fmt.Errorf("building the Temporal tracing interceptor: %w", err)
	}
	opts.Interceptors = append(opts.Interceptors, tracing)
	c, err := Codec(cfg)
	if err != nil {
		return client.Options{}, nil, err
	}
	if c != nil {
		opts.DataConverter = c.DataConverter()
	}
	return opts, c, nil
}

// Codec loads the payload codec's keyring cfg names; nil when it names none.
func Codec(cfg config.Temporal) (*codec.Codec, error) {
	switch {
	case cfg.CodecKeyFile != "":
		return codec.LoadFile(cfg.CodecKeyFile)
	case cfg.CodecKeysDir != "":
		return codec.LoadDir(cfg.CodecKeysDir, cfg.CodecKeyID)
	}
	return nil, nil
}

// profile returns the connection profile: the named profile of the client
// configuration file when cfg names one, else the [temporal] keys.
func profile(cfg config.Temporal) (envconfig.ClientConfigProfile, error) {
	if cfg.Profile != "" {
		prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
			ConfigFilePath:    cfg.ConfigFile,
			ConfigFileProfile: cfg.Profile,
		})
		if err != nil {
			return prof, fmt.Errorf("loading Temporal profile %q: %w", cfg.Profile, err)
		}
		if prof.Address == "" {
			prof.Address = cfg.Address
		}
		if prof.Namespace == "" {
			prof.Namespace = cfg.Namespace
		}
		return prof, nil
	}
	prof := envconfig.ClientConfigProfile{Address: cfg.Address, Namespace: cfg.Namespace, APIKey: cfg.APIKey}
	if cfg.TLS || cfg.CACertPath != "" || cfg.CertPath != "" || cfg.ServerName != "" {
		prof.TLS = &envconfig.ClientConfigTLS{
			ServerCACertPath: cfg.CACertPath,
			ClientCertPath:   cfg.CertPath,
			ClientKeyPath:    cfg.KeyPath,
			ServerName:       cfg.ServerName,
		}
	}
	return prof, nil
}
