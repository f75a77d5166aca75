package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// OtherVariable is a MANTIS_* variable that no daemon's configuration reads but that
// Mantis does, so that a daemon does not call it unknown.
type OtherVariable struct {
	// Name is the variable's name, or a prefix when it ends in "_".
	Name string
	// ReadBy says what reads it.
	ReadBy string
}

// OtherVariables are the MANTIS_* variables outside the daemons' configurations: the
// configuration reference lists them beside the keys.
var OtherVariables = []OtherVariable{
	{"MANTIS_SECRET_", `a step's env_secret "env:" references (Mandible reads them when Thorax fetches a command)`},
	{"MANTIS_API_URL", "mantisctl: the server"},
	{"MANTIS_API_TOKEN", "mantisctl: the API token"},
	{"MANTIS_CA_CERT", "mantisctl: the CA the server's certificate is checked against"},
	{"MANTIS_CONTEXT", "mantisctl: the context of the client configuration"},
	{"MANTIS_WEBHOOK_SECRET", "mantisctl webhook create: the signing secret"},
	{"MANTIS_HEALTHCHECK_", "the container image's health check (URL, CA_CERT)"},
	{"MANTIS_IMAGE", "the Compose file: the image of Mandible and Thorax"},
	{"MANTIS_AGENT_IMAGE", "the Compose file: the agents' image"},
	{"MANTIS_TARGET", "set by the agent for each command it runs: the target"},
	{"MANTIS_COMMAND_ID", "set by the agent for each command it runs"},
	{"MANTIS_DISPATCH_REQUEST_ID", "set by the agent for each command it runs"},
	{"MANTIS_TEST_", "the test suite: the dev stack it runs against"},
	{"MANTIS_STACK_DIR", "the test suite and the dev stack"},
	{"MANTIS_ROOTFS", "make deploy-check and make release-check: tests that build Debian roots"},
	{"MANTIS_POSTGRES_ADMIN_URL", "the dev stack's stack.env"},
	{"MANTIS_TEMPORAL_KIND", "the dev stack's stack.env"},
	{"MANTIS_TEMPORAL_POSTGRES_DATABASES", "the dev stack's stack.env"},
	{"MANTIS_AMQP_", "the dev stack's stack.env: the broker"},
	{"MANTIS_GRPC_ADDR", "the dev stack's stack.env"},
	{"MANTIS_THORAX_AGENTS_ADDR", "the dev stack's stack.env"},
	{"MANTIS_AGENT_LISTEN_ADDR", "the dev stack's stack.env"},
	{"MANTIS_TARGET_POLL", "the dev stack's stack.env"},
	{"MANTIS_TARGET_LISTEN", "the dev stack's stack.env"},
	{"MANTIS_CLIENT_CERT", "the dev stack's stack.env"},
	{"MANTIS_CLIENT_KEY", "the dev stack's stack.env"},
	{"MANTIS_BENCH_", "make bench-check"},
	{"MANTIS_SOAK_", "make soak"},
	{"MANTIS_SCALE_", "make scale"},
	{"MANTIS_CHAOS", "make chaos"},
	{"MANTIS_CHAOS_TABLE", "make chaos"},
	{"MANTIS_FAULT_", "the fault suite"},
	{"MANTIS_RECORD_", "recording workflow histories"},
	{"MANTIS_REQUIRE_TEMPORAL_SERVER", "make test-temporal-server"},
	{"MANTIS_UPDATE_SCREENSHOTS", "the console's browser test"},
	{"MANTIS_CONSOLE_SCREENSHOTS", "the console's browser test"},
	{"MANTIS_AXE_JS", "the console's browser test"},
}

// daemonConfigs are the three daemons' configurations by name, for telling a variable
// of another daemon from a typo.
var daemonConfigs = map[string]func() any{
	"mandible": func() any { return DefaultMandible() },
	"thorax":   func() any { return DefaultThorax() },
	"agent":    func() any { return DefaultAgent() },
}

// UnknownEnv names each MANTIS_* variable of environ ("NAME=value" strings) that the
// configuration cfg (a daemon's configuration struct) does not read and that is not
// one of OtherVariables, with a hint when it is a key of another daemon. An unknown
// file key is an error; an unknown variable is only named, since one environment is
// often shared by several processes.
func UnknownEnv(cfg any, environ []string) []string {
	own := envNames(cfg)
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MANTIS_") || own[name] || isOtherVariable(name) {
			continue
		}
		msg := name + " is not a configuration variable of this process"
		if others := daemonsReading(name); len(others) > 0 {
			msg += fmt.Sprintf(" (%s reads it)", strings.Join(others, " and "))
		}
		out = append(out, msg)
	}
	sort.Strings(out)
	return out
}

// envNames is the set of variables cfg's keys read.
func envNames(cfg any) map[string]bool {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	names := map[string]bool{}
	for _, f := range fields(v) {
		names[f.envName()] = true
	}
	return names
}

func isOtherVariable(name string) bool {
	for _, o := range OtherVariables {
		if name == o.Name || (strings.HasSuffix(o.Name, "_") && strings.HasPrefix(name, o.Name)) {
			return true
		}
	}
	return false
}

func daemonsReading(name string) []string {
	var out []string
	for daemon, cfg := range daemonConfigs {
		if envNames(cfg())[name] {
			out = append(out, daemon)
		}
	}
	sort.Strings(out)
	return out
}
