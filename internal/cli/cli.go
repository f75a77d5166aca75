// Package cli is the command-line scaffolding the Mantis daemons (mandible, thorax,
// agent) share: the root command with its --config flag, loading and validating the
// configuration, the check-config subcommand, the logger, and running until SIGINT or
// SIGTERM.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mantis-deploy/mantis/internal/version"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/config"
)

// Config is a daemon's configuration as the scaffolding needs it: printable with
// its secrets redacted.
type Config interface {
	String() string
}

// Loader loads a daemon's configuration from the TOML file at path (none when empty)
// and the environment, returning every problem at once.
type Loader[C Config] func(path string, lookup func(string) (string, bool)) (C, error)

// ConfigInvalid heads the error of a configuration that does not load.
const ConfigInvalid = "invalid configuration:"

// ExitConfig is the exit status of a daemon whose configuration does not load:
// EX_CONFIG of sysexits.h. The systemd units set RestartPreventExitStatus=78, so that a
// bad configuration stops the unit instead of restarting it forever.
const ExitConfig = 78

// ConfigDir is where each daemon looks for its configuration, <name>.toml, when
// --config is not given.
const ConfigDir = "/etc/mantis"

// ConfigError is a configuration that does not load, or a file that cannot be read.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return ConfigInvalid + "\n" + e.Err.Error() }

func (e *ConfigError) Unwrap() error { return e.Err }

// Daemon describes one daemon's command line.
type Daemon[C Config] struct {
	// Use, Short and Long are the root command's name and help.
	Use, Short, Long string
	// ConfigUsage is the help of the --config flag.
	ConfigUsage string
	// Load loads the configuration.
	Load Loader[C]
	// Log picks the logging section out of the configuration.
	Log func(C) config.Log
	// Run serves with the loaded configuration until ctx ends.
	Run func(ctx context.Context, cfg C, logger *slog.Logger) error
	// Checks, when set, lists the dependencies check-config --connect reaches with the
	// configuration; without it --connect has nothing to check.
	Checks func(cfg C, logger *slog.Logger) []Check
	// DefaultConfig is the file read when --config is not given, if it exists
	// (ConfigDir/<Use>.toml when empty). Without it, the configuration comes from the
	// environment alone; `--config ""` asks for that explicitly.
	DefaultConfig string
}

// defaultConfig is the file the daemon reads when --config is not given.
func (d Daemon[C]) defaultConfig() string {
	if d.DefaultConfig != "" {
		return d.DefaultConfig
	}
	return ConfigDir + "/" + d.Use + ".toml"
}

// Command builds the daemon's root command, which loads the configuration and runs
// the daemon, with its check-config subcommand. It returns the loader bound to the
// --config flag too, for the daemon's own subcommands.
func (d Daemon[C]) Command() (*cobra.Command, func() (C, error)) {
	var configPath string
	var root *cobra.Command
	load := func() (C, error) {
		path := configPath
		if !root.PersistentFlags().Changed("config") {
			if _, err := os.Stat(d.defaultConfig()); err == nil {
				path = d.defaultConfig()
			}
		}
		cfg, err := d.Load(path, os.LookupEnv)
		if err != nil {
			return cfg, &ConfigError{Err: err}
		}
		return cfg, nil
	}
	root = &cobra.Command{
		Use:           d.Use,
		Short:         d.Short,
		Long:          d.Long,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			logger := slog.New(d.Log(cfg).Handler(cmd.ErrOrStderr()))
			for _, w := range config.UnknownEnv(cfg, os.Environ()) {
				logger.WarnContext(cmd.Context(), "unknown variable", "problem", w)
			}
			return d.Run(cmd.Context(), cfg, logger)
		},
	}
	root.PersistentFlags().StringVar(&configPath, "config", "",
		d.ConfigUsage+" (default "+d.defaultConfig()+" when it exists; \"\" for none)")
	SetVersion(root)
	root.AddCommand(d.checkConfigCommand(load))
	return root, load
}

// checkConfigCommand is check-config: offline, it loads, validates and prints the
// configuration; with --connect it then reaches each dependency, a line per check.
func (d Daemon[C]) checkConfigCommand(load func() (C, error)) *cobra.Command {
	var connect bool
	cmd := &cobra.Command{
		Use:   "check-config",
		Short: "Load and validate the configuration, print it with secrets redacted, and exit",
		Long: `Load and validate the configuration, print it with secrets redacted, and exit.
With --connect, also connect to each dependency the configuration names and print one
line per check ("<check>: ok" or "<check>: FAILED: <why>"); the exit status is non-zero
when a check failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), cfg.String())
			for _, w := range config.UnknownEnv(cfg, os.Environ()) {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if !connect {
				return nil
			}
			var checks []Check
			if d.Checks != nil {
				checks = d.Checks(cfg, slog.New(d.Log(cfg).Handler(cmd.ErrOrStderr())))
			}
			return runChecks(cmd.Context(), cmd.OutOrStdout(), checks)
		},
	}
	cmd.Flags().BoolVar(&connect, "connect", false, "also connect to each dependency the configuration names and report each")
	return cmd
}

// Main executes root until SIGINT or SIGTERM ends its context and, when it fails,
// prints the error prefixed by the daemon's name and exits with ExitStatus's status.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, root.Name()+":", err)
		os.Exit(ExitStatus(err))
	}
}

// ExitStatus is the exit status of a daemon that failed with err: ExitConfig when its
// configuration did not load, 1 otherwise.
func ExitStatus(err error) int {
	if ce := (*ConfigError)(nil); errors.As(err, &ce) {
		return ExitConfig
	}
	return 1
}

// versionTemplate is a cobra version template printing "NAME VERSION-LINE".
const versionTemplate = "{{.Name}} {{.Version}}\n"

// SetVersion gives cmd a --version flag printing the running binary's build.
func SetVersion(cmd *cobra.Command) {
	cmd.Version = version.String()
	cmd.SetVersionTemplate(versionTemplate)
}
