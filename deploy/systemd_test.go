package deploy_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/stretchr/testify/require"
)

// unitSettings reads a systemd unit's [Service] section: every value of each key.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	settings := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			settings[k] = append(settings[k], v)
		}
	}
	return settings
}

// hardening is what the Mandible and Thorax units must set, with its value ("" for
// any value).
var hardening = map[string]string{
	"ProtectSystem": "strict", "ProtectHome": "yes", "NoNewPrivileges": "yes", "PrivateTmp": "yes",
	"PrivateDevices": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
	"ProtectKernelLogs": "yes", "ProtectControlGroups": "yes", "RestrictAddressFamilies": "",
	"LockPersonality": "yes", "MemoryDenyWriteExecute": "yes", "SystemCallFilter": "@system-service",
	"CapabilityBoundingSet": "", "DynamicUser": "yes",
}

func TestServerUnitsAreHardenedNotifyServices(t *testing.T) {
	t.Parallel()
	for _, unit := range []string{"mantis-mandible", "mantis-thorax"} {
		s := unitSettings(t, "systemd/"+unit+".service")
		for key, want := range hardening {
			require.Contains(t, s, key, "%s sets %s", unit, key)
			if want != "" || key == "CapabilityBoundingSet" {
				require.Equal(t, want, s[key][0], "%s: %s", unit, key)
			}
		}
		require.Equal(t, []string{"notify"}, s["Type"], unit)
		require.Equal(t, []string{"on-failure"}, s["Restart"], unit)
	}
}

// A daemon whose configuration does not load exits 78 (internal/cli.ExitConfig); each
// unit stops there instead of restarting every RestartSec forever.
func TestUnitsDoNotRestartABadConfiguration(t *testing.T) {
	t.Parallel()
	for _, unit := range []string{"mantis-mandible", "mantis-thorax", "mantis-agent"} {
		s := unitSettings(t, "systemd/"+unit+".service")
		require.Equal(t, []string{strconv.Itoa(cli.ExitConfig)}, s["RestartPreventExitStatus"], unit)
	}
}

func TestThoraxUnitOutlastsItsDrain(t *testing.T) {
	t.Parallel()
	var conf struct {
		Drain struct {
			Timeout string `toml:"timeout"`
		} `toml:"drain"`
	}
	_, err := toml.DecodeFile("thorax.toml", &conf)
	require.NoError(t, err)
	drain, err := time.ParseDuration(conf.Drain.Timeout)
	require.NoError(t, err)
	stop, err := time.ParseDuration(unitSettings(t, "systemd/mantis-thorax.service")["TimeoutStopSec"][0])
	require.NoError(t, err)
	// The drain, then the hand-back and the process's own exit.
	require.GreaterOrEqual(t, stop, drain+10*time.Second)
}

func TestAgentUnitKeepsItsJournalAndLetsCommandsFinish(t *testing.T) {
	t.Parallel()
	s := unitSettings(t, "systemd/mantis-agent.service")
	require.Equal(t, []string{"notify"}, s["Type"])
	require.Equal(t, []string{"mantis/agent"}, s["StateDirectory"])
	require.Equal(t, []string{"mixed"}, s["KillMode"], "SIGTERM to the agent alone, which stops its commands")
	stop, err := time.ParseDuration(s["TimeoutStopSec"][0])
	require.NoError(t, err)
	// exec.stop_timeout (15s) + kill_grace (5s) + 5s, as deploy/agent-poll.toml says.
	require.Greater(t, stop, 25*time.Second)
	require.Equal(t, []string{"on-failure"}, s["Restart"])
}
