package deploy_test

import (
	"bytes"
	"crypto/sha1" // an OpenPGP v4 fingerprint is SHA-1 by definition
	"encoding/base64"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The broker role's team path cannot be applied here (Team RabbitMQ's repositories
// are out of reach; make deploy-check applies its apt sources to a Debian 12 root,
// deploy/check/ansible-roles.sh). These tests read what it would do from the role.

// teamKeyFingerprint is Team RabbitMQ's signing key, as RabbitMQ's installation
// guide names it.
const teamKeyFingerprint = "0A9AF2115F4687BD29803A206B73A36E6026DFCA"

// ansibleTasks reads a task file of a role.
func ansibleTasks(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var tasks []map[string]any
	require.NoError(t, yaml.Unmarshal(b, &tasks), path)
	require.NotEmpty(t, tasks, path)
	return tasks
}

// taskIndex returns the index of the first task whose module is module and whose
// argument key has the value want (a string), or -1.
func taskIndex(tasks []map[string]any, module, key, want string) int {
	for i, task := range tasks {
		args, ok := task[module].(map[string]any)
		if ok && args[key] == want {
			return i
		}
	}
	return -1
}

func TestBrokerRoleDefaultsToTeamRabbitMQ(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("ansible/roles/rabbitmq/defaults/main.yml")
	require.NoError(t, err)
	var defaults struct {
		Source       string   `json:"rabbitmq_source"`
		Version      string   `json:"rabbitmq_team_version"`
		Repositories []string `json:"rabbitmq_team_repositories"`
		Suite        string   `json:"rabbitmq_team_suite"`
		Keyring      string   `json:"rabbitmq_team_keyring"`
		Erlang       []string `json:"rabbitmq_team_erlang_packages"`
	}
	require.NoError(t, yaml.Unmarshal(b, &defaults))
	require.Equal(t, "team", defaults.Source)
	// The version pattern holds rabbitmq-server at a 4.x release of at least 4.3,
	// the release deploy/compose runs.
	m := regexp.MustCompile(`^4\.(\d+)\.\*$`).FindStringSubmatch(defaults.Version)
	require.NotNil(t, m, "rabbitmq_team_version %q is not 4.<minor>.*", defaults.Version)
	minor, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, minor, 3, defaults.Version)
	require.Equal(t, "bookworm", defaults.Suite)
	for _, repo := range []string{"rabbitmq-erlang", "rabbitmq-server"} {
		require.Contains(t, defaults.Repositories, "https://deb1.rabbitmq.com/"+repo+"/debian/bookworm")
	}
	require.True(t, strings.HasPrefix(defaults.Keyring, "/etc/apt/keyrings/"), defaults.Keyring)
	require.Contains(t, defaults.Erlang, "erlang-ssl")
	require.Contains(t, defaults.Erlang, "erlang-base")
}

func TestBrokerRoleInstallsBySource(t *testing.T) {
	t.Parallel()
	tasks := ansibleTasks(t, "ansible/roles/rabbitmq/tasks/main.yml")
	team := -1
	for i, task := range tasks {
		if task["ansible.builtin.import_tasks"] == "install-team.yml" {
			team = i
		}
	}
	require.GreaterOrEqual(t, team, 0, "main.yml imports install-team.yml")
	require.Equal(t, "rabbitmq_install | bool and rabbitmq_source == 'team'", tasks[team]["when"])
	debian := taskIndex(tasks, "ansible.builtin.apt", "name", "rabbitmq-server")
	require.GreaterOrEqual(t, debian, 0, "main.yml installs Debian's rabbitmq-server")
	require.Equal(t, "rabbitmq_install | bool and rabbitmq_source == 'debian'", tasks[debian]["when"])
	conf := taskIndex(tasks, "ansible.builtin.template", "src", "rabbitmq.conf.j2")
	require.Greater(t, conf, team, "the package is installed before its configuration is written")
	require.Greater(t, conf, debian)
}

func TestBrokerRoleTeamPathAddsTheRepositoryAndPinsTheVersion(t *testing.T) {
	t.Parallel()
	tasks := ansibleTasks(t, "ansible/roles/rabbitmq/tasks/install-team.yml")
	key := taskIndex(tasks, "ansible.builtin.copy", "src", "com.rabbitmq.team.asc")
	require.GreaterOrEqual(t, key, 0, "the key is copied from the role's files")
	require.Equal(t, "{{ rabbitmq_team_keyring }}", tasks[key]["ansible.builtin.copy"].(map[string]any)["dest"])

	sources := taskIndex(tasks, "ansible.builtin.copy", "dest", "/etc/apt/sources.list.d/rabbitmq-team.list")
	require.GreaterOrEqual(t, sources, 0)
	content := tasks[sources]["ansible.builtin.copy"].(map[string]any)["content"].(string)
	require.Contains(t, content, "{% for url in rabbitmq_team_repositories %}")
	require.Contains(t, content, "deb [signed-by={{ rabbitmq_team_keyring }}] {{ url }} {{ rabbitmq_team_suite }} main")

	prefs := taskIndex(tasks, "ansible.builtin.copy", "dest", "/etc/apt/preferences.d/rabbitmq-team")
	require.GreaterOrEqual(t, prefs, 0)
	content = tasks[prefs]["ansible.builtin.copy"].(map[string]any)["content"].(string)
	require.Contains(t, content, "Package: rabbitmq-server\nPin: version {{ rabbitmq_team_version }}\nPin-Priority: 1000\n")
	require.Contains(t, content, "Package: rabbitmq-server\nPin: release o=Debian\nPin-Priority: -1\n")
	require.Contains(t, content, "Package: erlang*\nPin: origin \"{{ host }}\"\nPin-Priority: 1000\n")

	erlang := taskIndex(tasks, "ansible.builtin.apt", "name", "{{ rabbitmq_team_erlang_packages }}")
	server := taskIndex(tasks, "ansible.builtin.apt", "name", "rabbitmq-server={{ rabbitmq_team_version }}")
	require.GreaterOrEqual(t, erlang, 0, "Erlang is installed from the team's repository")
	require.GreaterOrEqual(t, server, 0, "rabbitmq-server is installed at rabbitmq_team_version")
	for _, setup := range []int{key, sources, prefs} {
		require.Less(t, setup, erlang, "the key, sources and preferences come before any install")
		require.Contains(t, tasks[setup]["tags"], "rabbitmq_apt_sources", "deploy-check applies them by this tag")
	}
	require.Less(t, erlang, server)
	require.Equal(t, true, tasks[erlang]["ansible.builtin.apt"].(map[string]any)["update_cache"])
}

func TestBrokerRoleShipsTeamRabbitMQKey(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("ansible/roles/rabbitmq/files/com.rabbitmq.team.asc")
	require.NoError(t, err)
	require.Equal(t, teamKeyFingerprint, openPGPFingerprint(t, b))
}

// openPGPFingerprint is the v4 fingerprint of the first public key packet of an
// armored key: SHA-1 of 0x99, the packet body's two-octet length, and the body.
func openPGPFingerprint(t *testing.T, armored []byte) string {
	t.Helper()
	_, rest, ok := bytes.Cut(armored, []byte("\n\n"))
	require.True(t, ok, "armor headers end with a blank line")
	var body strings.Builder
	for _, line := range strings.Split(string(rest), "\n") {
		if strings.HasPrefix(line, "=") || strings.HasPrefix(line, "-----END") {
			break
		}
		body.WriteString(strings.TrimSpace(line))
	}
	packets, err := base64.StdEncoding.DecodeString(body.String())
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(packets), 3)
	var length, header int
	switch tag := packets[0]; {
	case tag == 0xc6 && packets[1] < 192: // new format, public key, one-octet length
		length, header = int(packets[1]), 2
	case tag == 0xc6 && packets[1] < 224: // new format, two-octet length
		length, header = (int(packets[1])-192)<<8+int(packets[2])+192, 3
	case tag == 0x99: // old format, public key, two-octet length
		length, header = int(packets[1])<<8|int(packets[2]), 3
	default:
		t.Fatalf("the key does not start with a public key packet (0x%02x)", tag)
	}
	require.LessOrEqual(t, header+length, len(packets))
	h := sha1.New()
	h.Write([]byte{0x99, byte(length >> 8), byte(length)})
	h.Write(packets[header : header+length])
	return strings.ToUpper(hex.EncodeToString(h.Sum(nil)))
}

// The check of the broker role against the dev stack's RabbitMQ (Debian's 3.10)
// names its source: the default, team, is not what it runs.
func TestBrokerCheckRunsDebianSource(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("check/ansible-broker.sh")
	require.NoError(t, err)
	require.Contains(t, string(b), `"rabbitmq_source": "debian",`)
}

// The Mantis roles install the binaries where the units' ExecStart runs them and
// make the group the units name.
func TestMantisRolesMatchTheUnits(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("ansible/roles/mantis_common/defaults/main.yml")
	require.NoError(t, err)
	var common struct {
		BinDir string `json:"mantis_bin_dir"`
		Group  string `json:"mantis_group"`
		Config string `json:"mantis_config_dir"`
	}
	require.NoError(t, yaml.Unmarshal(b, &common))
	for _, name := range []string{"mandible", "thorax", "agent"} {
		s := unitSettings(t, "systemd/mantis-"+name+".service")
		require.Equal(t, []string{common.BinDir + "/" + name + " --config " + common.Config + "/" + name + ".toml"},
			s["ExecStart"], name)
		if name != "agent" {
			require.Equal(t, []string{common.Group}, s["Group"], name)
			require.Equal(t, []string{common.Group}, s["SupplementaryGroups"], name)
		}
		tasks := ansibleTasks(t, "ansible/roles/mantis_"+name+"/tasks/main.yml")
		tmpl := taskIndex(tasks, "ansible.builtin.template", "dest", "{{ mantis_config_dir }}/"+name+".toml")
		require.GreaterOrEqual(t, tmpl, 0, name)
		require.Equal(t, "{{ mantis_bin_dir }}/"+name+" check-config --config %s",
			tasks[tmpl]["ansible.builtin.template"].(map[string]any)["validate"], name)
	}
}
