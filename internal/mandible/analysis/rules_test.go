package analysis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// patternExamples holds a real-looking line for every pattern. The test below fails
// for a pattern without one, so a pattern that an earlier one shadows, or that its
// rule's keywords keep from ever running, cannot go unnoticed.
var patternExamples = map[string]string{
	"out_of_memory.java":            `Exception in thread "main" java.lang.OutOfMemoryError: GC overhead limit exceeded`,
	"out_of_memory.node":            `FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory`,
	"out_of_memory.oom_killer":      `[812345.123] Out of memory: Kill process 4242 (postgres) score 912 or sacrifice child`,
	"out_of_memory.oom_killed":      `Last State: Terminated  Reason: OOMKilled  Exit Code: 137`,
	"out_of_memory.out_of_memory":   `ERROR: out of memory DETAIL: Failed on request of size 1048576.`,
	"out_of_memory.cannot_allocate": `-bash: fork: Cannot allocate memory`,
	"out_of_memory.python":          `MemoryError`,
	"out_of_memory.killed":          `Killed`,

	"disk_full.enospc": `tar: ./data/blob: Cannot write: No space left on device`,
	"disk_full.quota":  `cp: error writing 'report.csv': Disk quota exceeded`,
	"disk_full.apt":    `E: You don't have enough free space in /var/cache/apt/archives/.`,

	"authentication.ssh_publickey":      `deploy@10.0.0.7: Permission denied (publickey,password).`,
	"authentication.git":                `fatal: Authentication failed for 'https://gitlab.example.com/ops/infra.git/'`,
	"authentication.git_no_credentials": `fatal: could not read Username for 'https://github.com': terminal prompts disabled`,
	"authentication.postgres":           `FATAL:  password authentication failed for user "app"`,
	"authentication.mysql":              `ERROR 1045 (28000): Access denied for user 'app'@'10.0.0.5' (using password: YES)`,
	"authentication.http_401":           `Error: HTTP/1.1 401 Unauthorized`,
	"authentication.http_403":           `Error response: status code 403`,
	"authentication.registry":           `unauthorized: incorrect username or password`,
	"authentication.registry_denied":    `denied: requested access to the resource is denied`,
	"authentication.credentials":        `Error: bad credentials`,
	"authentication.failed":             `ldap_bind: Invalid DN syntax (34); authentication failed`,

	"syntax_error.crlf": "/opt/tools/run.sh: line 1: /opt/tools/run.sh: /bin/sh\r: bad interpreter: No such file or directory",

	"command_not_found.interpreter": `bash: ./manage.py: /usr/bin/python2: bad interpreter: No such file or directory`,
	"command_not_found.env":         `/usr/bin/env: 'node': No such file or directory`,
	"command_not_found.zsh":         `zsh: command not found: ansible-playbook`,
	"command_not_found.bash":        `bash: docker-compose: command not found`,
	"command_not_found.sh":          `sh: 1: rsync: not found`,
	"command_not_found.exec":        `exec: "psql": executable file not found in $PATH`,
	"command_not_found.ubuntu":      `Command 'jq' not found, but can be installed with:`,
	"command_not_found.windows":     `'npm' is not recognized as an internal or external command,`,

	"missing_dependency.python":          `ImportError: No module named requests`,
	"missing_dependency.pip":             `ERROR: Could not find a version that satisfies the requirement tensorflow==1.2.0 (from versions: none)`,
	"missing_dependency.node":            `Error: Cannot find module '@acme/config'`,
	"missing_dependency.go":              `main.go:5:2: cannot find package "github.com/acme/log" in any of:`,
	"missing_dependency.go_module":       `cmd/main.go:9:2: no required module provides package golang.org/x/sync/errgroup; to add it:`,
	"missing_dependency.shared_library":  `/usr/local/bin/node: error while loading shared libraries: libatomic.so.1: cannot open shared object file: No such file or directory`,
	"missing_dependency.header":          `ext/zlib.c:1:10: fatal error: zlib.h: No such file or directory`,
	"missing_dependency.ruby":            `<internal:rubygems>:85:in 'require': cannot load such file -- bundler/setup (LoadError)`,
	"missing_dependency.gem":             `Could not find gem 'rails (~> 7.1)' in locally installed gems.`,
	"missing_dependency.apt":             `E: Unable to locate package python3.12-venv`,
	"missing_dependency.yum":             `No package nginx-module-geoip available.`,
	"missing_dependency.dnf":             `No match for argument: postgresql16-server`,
	"missing_dependency.npm":             `npm ERR! 404 Not Found - GET https://registry.npmjs.org/@acme%2fui - Not found`,
	"missing_dependency.package":         `Package 'openssl' not found`,
	"missing_dependency.package_generic": `Error: package not found: chart-museum/webapp`,

	"network_unreachable.resolve":         `fatal: unable to access 'https://git.example.com/x.git/': Could not resolve host: git.example.com`,
	"network_unreachable.lookup":          `dial tcp: lookup db.internal: no such host`,
	"network_unreachable.resolve_name":    `ping: db.internal: Name or service not known`,
	"network_unreachable.name_resolution": `Error: getaddrinfo ENOTFOUND registry.npmjs.org`,
	"network_unreachable.refused":         `redis.exceptions.ConnectionError: Error 111 connecting to 10.0.0.9:6379. Connection refused.`,
	"network_unreachable.no_route":        `nc: connect to 10.1.2.3 port 5432 (tcp) failed: No route to host`,
	"network_unreachable.unreachable":     `ping: sendmsg: Network is unreachable`,
	"network_unreachable.connect_timeout": `ssh: connect to host bastion.example.com port 22: Connection timed out`,
	"network_unreachable.reset":           `curl: (56) Recv failure: Connection reset by peer`,
	"network_unreachable.connect":         `ERROR: unable to connect to mq.example.com:5671`,

	"permission_denied.root":          `This script must be run as root`,
	"permission_denied.docker_socket": `Got permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.45/info": dial unix /var/run/docker.sock: connect: permission denied`,
	"permission_denied.denied":        `rm: cannot remove '/var/log/app/old.log': Permission denied`,
	"permission_denied.not_permitted": `touch: setting times of '/mnt/nfs/flag': Operation not permitted`,
	"permission_denied.windows":       `Access is denied.`,

	"file_not_found.enoent":         `FileNotFoundError: [Errno 2] No such file or directory: '/srv/app/.env'`,
	"file_not_found.no_such_file":   `ls: cannot access '/srv/releases/current': No such file or directory`,
	"file_not_found.windows":        `The system cannot find the path specified.`,
	"file_not_found.does_not_exist": `Error: path "charts/webapp" does not exist`,
	"file_not_found.file_not_found": `error: file not found: values-prod.yaml`,
	"syntax_error.shell":            "deploy.sh: line 14: syntax error near unexpected token `fi'",
	"syntax_error.shell_eof":        "deploy.sh: line 3: unexpected EOF while looking for matching `\"'",
	"syntax_error.shell_eof_plain":  `deploy.sh: line 40: syntax error: unexpected end of file`,
	"syntax_error.yaml":             `Error: yaml: line 12: did not find expected key`,
	"syntax_error.json":             `Error: invalid character '}' looking for beginning of object key string`,
	"syntax_error.language":         `SyntaxError: Unexpected token '}'`,
	"syntax_error.parse":            `PHP Parse error:  syntax error, unexpected end of file in /srv/app/index.php on line 88`,
	"syntax_error.syntax":           `jq: error: syntax error, unexpected INVALID_CHARACTER (Unix shell quoting issues?) at <top-level>, line 1:`,
	"timeout.timed_out":             `Error: UPGRADE FAILED: timed out waiting for the condition`,
	"timeout.deadline":              `Error: context deadline exceeded`,
}

func TestEveryPatternHasAMatchingExample(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, r := range rules {
		for _, p := range r.patterns {
			name := r.category + "." + p.name
			require.False(t, names[name], "pattern %s is named twice", name)
			names[name] = true
			example, ok := patternExamples[name]
			require.True(t, ok, "pattern %s has no example", name)
			got := Classify(example, 1, false)
			require.Equal(t, name, got.Rule, "example %q (summary %q)", example, got.Summary)
		}
	}
	for name := range patternExamples {
		require.True(t, names[name], "example for unknown pattern %s", name)
	}
}
