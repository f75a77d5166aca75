package analysis_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/analysis"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		output   string
		exitCode int
		timedOut bool

		category string
		summary  string
		rule     string
		// suggests is a part the suggestion must contain (the token, usually).
		suggests string
	}{
		{
			name:     "bash command not found",
			output:   "+ kubectl rollout status deploy/web\nbash: line 1: kubectl: command not found\n",
			exitCode: 127,
			category: analysis.CategoryCommandNotFound, summary: "command not found: kubectl", rule: "command_not_found.bash", suggests: "Install kubectl",
		},
		{
			name:     "dash command not found",
			output:   "/bin/sh: 1: helm: not found",
			exitCode: 127,
			category: analysis.CategoryCommandNotFound, summary: "command not found: helm", rule: "command_not_found.sh",
		},
		{
			name:     "zsh command not found",
			output:   "zsh:1: command not found: terraform",
			exitCode: 127,
			category: analysis.CategoryCommandNotFound, summary: "command not found: terraform", rule: "command_not_found.zsh",
		},
		{
			name:     "exec in PATH",
			output:   `Error: failed to start container: exec: "gunicorn": executable file not found in $PATH: unknown`,
			exitCode: 1,
			category: analysis.CategoryCommandNotFound, summary: "command not found: gunicorn", rule: "command_not_found.exec",
		},
		{
			name:     "ubuntu command-not-found handler",
			output:   "Command 'aws' not found, but can be installed with:\n\nsudo snap install aws-cli\n",
			exitCode: 127,
			category: analysis.CategoryCommandNotFound, summary: "command not found: aws", rule: "command_not_found.ubuntu",
		},
		{
			name:     "missing interpreter",
			output:   "/usr/bin/env: ‘python’: No such file or directory",
			exitCode: 127,
			category: analysis.CategoryCommandNotFound, summary: "interpreter not found: python", rule: "command_not_found.env",
		},
		{
			name:     "exit 127 alone",
			output:   "",
			exitCode: 127,
			category: analysis.CategoryCommandNotFound, summary: "command not found (exit code 127)", rule: "command_not_found.exit_127",
		},
		{
			name:     "permission denied on a script",
			output:   "bash: line 1: ./scripts/migrate.sh: Permission denied",
			exitCode: 126,
			category: analysis.CategoryPermissionDenied, summary: "permission denied: ./scripts/migrate.sh", rule: "permission_denied.denied",
			suggests: "access to ./scripts/migrate.sh",
		},
		{
			name:     "mkdir with GNU quotes",
			output:   "mkdir: cannot create directory ‘/var/lib/webapp’: Permission denied",
			exitCode: 1,
			category: analysis.CategoryPermissionDenied, summary: "permission denied: /var/lib/webapp", rule: "permission_denied.denied",
		},
		{
			name:     "go open",
			output:   "time=2025-03-01T10:00:00Z level=ERROR msg=\"loading config\" err=\"open /etc/webapp/tls.key: permission denied\"",
			exitCode: 1,
			category: analysis.CategoryPermissionDenied, summary: "permission denied: /etc/webapp/tls.key", rule: "permission_denied.denied",
		},
		{
			name:     "node EACCES",
			output:   "Error: EACCES: permission denied, open '/srv/app/.env'\n    at Object.openSync (node:fs:596:3)",
			exitCode: 1,
			category: analysis.CategoryPermissionDenied, summary: "permission denied: /srv/app/.env", rule: "permission_denied.denied",
		},
		{
			name: "apt without root",
			output: "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)\n" +
				"E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?",
			exitCode: 100,
			category: analysis.CategoryPermissionDenied, summary: "root privileges required: /var/lib/dpkg/lock-frontend", rule: "permission_denied.root",
		},
		{
			name:     "docker socket",
			output:   "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.24/containers/json\": dial unix /var/run/docker.sock: connect: permission denied",
			exitCode: 1,
			category: analysis.CategoryPermissionDenied, summary: "permission denied on the Docker socket: unix:///var/run/docker.sock", rule: "permission_denied.docker_socket",
			suggests: "docker group",
		},
		{
			name:     "operation not permitted",
			output:   "chown: changing ownership of '/srv/app/releases': Operation not permitted",
			exitCode: 1,
			category: analysis.CategoryPermissionDenied, summary: "operation not permitted: /srv/app/releases", rule: "permission_denied.not_permitted",
		},
		{
			name:     "exit 126 alone",
			exitCode: 126,
			category: analysis.CategoryPermissionDenied, summary: "command found but not executable (exit code 126)", rule: "permission_denied.exit_126",
		},
		{
			name:     "connection refused by go",
			output:   "Error: failed to connect to `host=10.0.4.12 user=app database=app`: dial error (dial tcp 10.0.4.12:5432: connect: connection refused)",
			exitCode: 1,
			category: analysis.CategoryNetworkUnreachable, summary: "connection refused: 10.0.4.12:5432", rule: "network_unreachable.refused",
			suggests: "10.0.4.12:5432 is up",
		},
		{
			name:     "curl connection refused",
			output:   "  % Total    % Received % Xferd\ncurl: (7) Failed to connect to localhost port 8080 after 0 ms: Connection refused",
			exitCode: 7,
			category: analysis.CategoryNetworkUnreachable, summary: "connection refused: localhost:8080", rule: "network_unreachable.refused",
		},
		{
			name:     "psql connection refused",
			output:   `psql: error: connection to server at "db.internal" (10.0.0.5), port 5432 failed: Connection refused`,
			exitCode: 2,
			category: analysis.CategoryNetworkUnreachable, summary: "connection refused: db.internal:5432", rule: "network_unreachable.refused",
		},
		{
			name:     "ssh no route",
			output:   "ssh: connect to host 10.20.0.7 port 22: No route to host",
			exitCode: 255,
			category: analysis.CategoryNetworkUnreachable, summary: "no route to host: 10.20.0.7:22", rule: "network_unreachable.no_route",
		},
		{
			name:     "curl could not resolve host",
			output:   "curl: (6) Could not resolve host: artifacts.example.com",
			exitCode: 6,
			category: analysis.CategoryNetworkUnreachable, summary: "cannot resolve host: artifacts.example.com", rule: "network_unreachable.resolve",
		},
		{
			name:     "ssh temporary failure in name resolution",
			output:   "ssh: Could not resolve hostname db-primary: Temporary failure in name resolution",
			exitCode: 255,
			category: analysis.CategoryNetworkUnreachable, summary: "cannot resolve host: db-primary", rule: "network_unreachable.resolve",
		},
		{
			name:     "apt temporary failure in name resolution",
			output:   "Err:1 http://archive.ubuntu.com/ubuntu jammy InRelease\n  Temporary failure resolving 'archive.ubuntu.com'\nW: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/jammy/InRelease  Temporary failure in name resolution",
			exitCode: 100,
			category: analysis.CategoryNetworkUnreachable, summary: "name resolution failed: archive.ubuntu.com", rule: "network_unreachable.name_resolution",
		},
		{
			name:     "go lookup",
			output:   `Get "https://registry.example.com/v2/": dial tcp: lookup registry.example.com on 127.0.0.53:53: no such host`,
			exitCode: 1,
			category: analysis.CategoryNetworkUnreachable, summary: "cannot resolve host: registry.example.com", rule: "network_unreachable.lookup",
		},
		{
			name:     "network unreachable",
			output:   "connect: Network is unreachable",
			exitCode: 2,
			category: analysis.CategoryNetworkUnreachable, summary: `network unreachable: "connect: Network is unreachable"`, rule: "network_unreachable.unreachable",
		},
		{
			name:     "dial timeout is the network, not the command's timeout",
			output:   `Error: Get "https://api.example.com:8443/health": dial tcp 203.0.113.9:8443: i/o timeout`,
			exitCode: 1,
			category: analysis.CategoryNetworkUnreachable, summary: "connection timed out: api.example.com:8443", rule: "network_unreachable.connect_timeout",
		},
		{
			name:     "no space left",
			output:   "Step 4/9 : RUN npm ci\nERROR: failed to register layer: write /var/lib/docker/overlay2/3f2a/diff/usr/lib/libLLVM.so: no space left on device",
			exitCode: 1,
			category: analysis.CategoryDiskFull, summary: "no space left on device: /var/lib/docker/overlay2/3f2a/diff/usr/lib/libLLVM.so", rule: "disk_full.enospc",
		},
		{
			name:     "cp no space left",
			output:   "cp: error writing '/srv/backups/db.dump': No space left on device",
			exitCode: 1,
			category: analysis.CategoryDiskFull, summary: "no space left on device: /srv/backups/db.dump", rule: "disk_full.enospc",
			suggests: "filesystem holding /srv/backups/db.dump",
		},
		{
			name:     "node ENOSPC",
			output:   "Error: ENOSPC: no space left on device, write",
			exitCode: 1,
			category: analysis.CategoryDiskFull, summary: `no space left on device: "Error: ENOSPC: no space left on device, write"`, rule: "disk_full.enospc",
		},
		{
			name:     "bash killed",
			output:   "Building index...\nbash: line 1:  4242 Killed                  java -Xmx8g -jar indexer.jar\n",
			exitCode: 137,
			category: analysis.CategoryOutOfMemory, summary: "killed (likely out of memory): java -Xmx8g -jar indexer.jar", rule: "out_of_memory.killed",
		},
		{
			name:     "plain Killed",
			output:   "Compiling webapp v0.1.0\nKilled",
			exitCode: 137,
			category: analysis.CategoryOutOfMemory, summary: `killed (likely out of memory): "Killed"`, rule: "out_of_memory.killed",
		},
		{
			name:     "go runtime out of memory",
			output:   "fatal error: runtime: out of memory\n\nruntime stack:\nruntime.throw({0x9a3b1e?, 0x400000?})",
			exitCode: 2,
			category: analysis.CategoryOutOfMemory, summary: `out of memory: "fatal error: runtime: out of memory"`, rule: "out_of_memory.out_of_memory",
		},
		{
			name:     "cannot allocate memory",
			output:   "bash: fork: Cannot allocate memory",
			exitCode: 254,
			category: analysis.CategoryOutOfMemory, summary: `cannot allocate memory: "bash: fork: Cannot allocate memory"`, rule: "out_of_memory.cannot_allocate",
		},
		{
			name:     "java heap",
			output:   "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)",
			exitCode: 1,
			category: analysis.CategoryOutOfMemory, summary: "Java out of memory: Java heap space", rule: "out_of_memory.java",
		},
		{
			name:     "OOM killer",
			output:   "Out of memory: Killed process 31337 (node) total-vm:4017340kB, anon-rss:3822152kB",
			exitCode: 137,
			category: analysis.CategoryOutOfMemory, summary: "killed by the OOM killer: node", rule: "out_of_memory.oom_killer",
		},
		{
			name:     "exit 137 alone beats what was printed before",
			output:   "Retrying in 5s: connection refused\nmigrating 120000 rows",
			exitCode: 137,
			category: analysis.CategoryOutOfMemory, summary: "killed by SIGKILL (exit code 137), likely out of memory", rule: "out_of_memory.exit_137",
		},
		{
			name:     "timed out flag",
			output:   "Waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available...\ntimed out",
			exitCode: -1,
			timedOut: true,
			category: analysis.CategoryTimeout,
			summary:  `command timed out; last output: "Waiting for deployment "web" rollout to finish: 1 of 3 updated replicas are available..."`,
			rule:     "timeout.killed",
		},
		{
			name:     "timed out flag beats a killed line",
			output:   "Killed",
			exitCode: 137,
			timedOut: true,
			category: analysis.CategoryTimeout, summary: `command timed out; last output: "Killed"`, rule: "timeout.killed",
		},
		{
			name:     "timed out text",
			output:   "curl: (28) Operation timed out after 30001 milliseconds with 0 bytes received",
			exitCode: 28,
			category: analysis.CategoryTimeout, summary: `timed out: "curl: (28) Operation timed out after 30001 milliseconds with 0 bytes received"`, rule: "timeout.timed_out",
		},
		{
			name:     "context deadline",
			output:   "Error: rpc error: code = DeadlineExceeded desc = context deadline exceeded",
			exitCode: 1,
			category: analysis.CategoryTimeout, summary: `deadline exceeded: "Error: rpc error: code = DeadlineExceeded desc = context deadline exceeded"`, rule: "timeout.deadline",
		},
		{
			name:     "ssh publickey beats permission denied",
			output:   "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.",
			exitCode: 128,
			category: analysis.CategoryAuthentication, summary: "SSH key rejected: git@github.com", rule: "authentication.ssh_publickey",
		},
		{
			name:     "git https",
			output:   "remote: Invalid username or password.\nfatal: Authentication failed for 'https://github.com/acme/webapp.git/'",
			exitCode: 128,
			category: analysis.CategoryAuthentication, summary: "authentication failed: https://github.com/acme/webapp.git/", rule: "authentication.git",
		},
		{
			name:     "postgres password",
			output:   `psql: error: connection to server at "10.0.0.5", port 5432 failed: FATAL:  password authentication failed for user "deploy"`,
			exitCode: 2,
			category: analysis.CategoryAuthentication, summary: "database login failed for user: deploy", rule: "authentication.postgres",
		},
		{
			name:     "http 401",
			output:   "curl: (22) The requested URL returned error: 401",
			exitCode: 22,
			category: analysis.CategoryAuthentication, summary: `unauthorized (HTTP 401): "curl: (22) The requested URL returned error: 401"`, rule: "authentication.http_401",
		},
		{
			name:     "http 403 with url",
			output:   "Error: GET https://charts.example.com/index.yaml : 403 Forbidden",
			exitCode: 1,
			category: analysis.CategoryAuthentication, summary: "forbidden (HTTP 403): https://charts.example.com/index.yaml", rule: "authentication.http_403",
		},
		{
			name:     "docker registry",
			output:   "Error response from daemon: Head \"https://ghcr.io/v2/acme/web/manifests/1.4.2\": unauthorized: authentication required",
			exitCode: 1,
			category: analysis.CategoryAuthentication, summary: "unauthorized: authentication required", rule: "authentication.registry",
		},
		{
			name:     "python module",
			output:   "Traceback (most recent call last):\n  File \"/srv/app/manage.py\", line 4, in <module>\n    import yaml\nModuleNotFoundError: No module named 'yaml'",
			exitCode: 1,
			category: analysis.CategoryMissingDependency, summary: "missing Python module: yaml", rule: "missing_dependency.python", suggests: "Install yaml",
		},
		{
			name:     "shared library beats no such file",
			output:   "./webapp: error while loading shared libraries: libssl.so.1.1: cannot open shared object file: No such file or directory",
			exitCode: 127,
			category: analysis.CategoryMissingDependency, summary: "missing shared library: libssl.so.1.1", rule: "missing_dependency.shared_library",
		},
		{
			name:     "go package",
			output:   "main.go:7:2: no required module provides package github.com/acme/lib/log; to add it:\n\tgo get github.com/acme/lib/log",
			exitCode: 1,
			category: analysis.CategoryMissingDependency, summary: "missing Go package: github.com/acme/lib/log", rule: "missing_dependency.go_module",
		},
		{
			name:     "node module",
			output:   "Error: Cannot find module 'express'\nRequire stack:\n- /srv/app/server.js",
			exitCode: 1,
			category: analysis.CategoryMissingDependency, summary: "missing Node.js module: express", rule: "missing_dependency.node",
		},
		{
			name:     "apt package",
			output:   "Reading package lists...\nE: Unable to locate package nginx-extras",
			exitCode: 100,
			category: analysis.CategoryMissingDependency, summary: "package not found: nginx-extras", rule: "missing_dependency.apt",
		},
		{
			name:     "pkg-config",
			output:   "Package libpq was not found in the pkg-config search path.",
			exitCode: 1,
			category: analysis.CategoryMissingDependency, summary: "package not found: libpq", rule: "missing_dependency.package",
		},
		{
			name:     "C header",
			output:   "src/db.c:3:10: fatal error: libpq-fe.h: No such file or directory\n    3 | #include <libpq-fe.h>\ncompilation terminated.",
			exitCode: 1,
			category: analysis.CategoryMissingDependency, summary: "missing header file: libpq-fe.h", rule: "missing_dependency.header",
		},
		{
			name:     "cat no such file",
			output:   "cat: /etc/webapp/config.yml: No such file or directory",
			exitCode: 1,
			category: analysis.CategoryFileNotFound, summary: "no such file or directory: /etc/webapp/config.yml", rule: "file_not_found.no_such_file",
			suggests: "Check that /etc/webapp/config.yml exists",
		},
		{
			name:     "python FileNotFoundError",
			output:   "FileNotFoundError: [Errno 2] No such file or directory: 'settings.toml'",
			exitCode: 1,
			category: analysis.CategoryFileNotFound, summary: "no such file or directory: settings.toml", rule: "file_not_found.enoent",
		},
		{
			name:     "node ENOENT",
			output:   "Error: ENOENT: no such file or directory, open '/srv/app/package.json'",
			exitCode: 1,
			category: analysis.CategoryFileNotFound, summary: "no such file or directory: /srv/app/package.json", rule: "file_not_found.enoent",
		},
		{
			name:     "bash script missing",
			output:   "bash: ./deploy.sh: No such file or directory",
			exitCode: 127,
			category: analysis.CategoryFileNotFound, summary: "no such file or directory: ./deploy.sh", rule: "file_not_found.no_such_file",
		},
		{
			name:     "bare name after program",
			output:   "cat: VERSION: No such file or directory",
			exitCode: 1,
			category: analysis.CategoryFileNotFound, summary: "no such file or directory: VERSION", rule: "file_not_found.no_such_file",
		},
		{
			name:     "CRLF script",
			output:   "bash: ./deploy.sh: /bin/bash\r: bad interpreter: No such file or directory",
			exitCode: 126,
			category: analysis.CategorySyntaxError, summary: "script has Windows (CRLF) line endings: ./deploy.sh", rule: "syntax_error.crlf",
			suggests: "dos2unix",
		},
		{
			name:     "bash syntax error",
			output:   "bash: -c: line 1: syntax error near unexpected token `)'\nbash: -c: line 1: `echo $(date'",
			exitCode: 2,
			category: analysis.CategorySyntaxError, summary: "shell syntax error near unexpected token: )", rule: "syntax_error.shell",
		},
		{
			name:     "python syntax error",
			output:   "  File \"/srv/app/migrate.py\", line 12\n    print \"done\"\n    ^^^^^^^^^^^^\nSyntaxError: Missing parentheses in call to 'print'. Did you mean print(...)?",
			exitCode: 1,
			category: analysis.CategorySyntaxError, summary: "syntax error: Missing parentheses in call to 'print'. Did you mean print(...)?", rule: "syntax_error.language",
		},
		{
			name:     "yaml",
			output:   "error: error parsing deploy.yaml: error converting YAML to JSON: yaml: line 7: mapping values are not allowed in this context",
			exitCode: 1,
			category: analysis.CategorySyntaxError, summary: "YAML syntax error: line 7: mapping values are not allowed in this context", rule: "syntax_error.yaml",
		},
		{
			name:     "unknown quotes the last line",
			output:   "go build ./...\nmake: *** [Makefile:12: build] Error 1\n\n",
			exitCode: 2,
			category: analysis.CategoryUnknown, summary: `exit code 2: "make: *** [Makefile:12: build] Error 1"`, rule: "unknown",
		},
		{
			name:     "unknown without output",
			exitCode: 3,
			category: analysis.CategoryUnknown, summary: "exit code 3 with no output", rule: "unknown",
		},
		{
			name:     "colours and progress bars are stripped",
			output:   "\x1b[1;31merror\x1b[0m: deploy failed\n45%\r80%\r\x1b[31mrollout aborted\x1b[0m\n",
			exitCode: 1,
			category: analysis.CategoryUnknown, summary: `exit code 1: "rollout aborted"`, rule: "unknown",
		},
		{
			name:     "the last matching line wins within a category",
			output:   "cat: a.txt: No such file or directory\ncat: b.txt: No such file or directory",
			exitCode: 1,
			category: analysis.CategoryFileNotFound, summary: "no such file or directory: b.txt", rule: "file_not_found.no_such_file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := analysis.Classify(tt.output, tt.exitCode, tt.timedOut)
			require.Equal(t, tt.category, got.Category, "summary %q", got.Summary)
			require.Equal(t, tt.summary, got.Summary)
			require.Equal(t, tt.rule, got.Rule)
			require.NotEmpty(t, got.Suggestion)
			require.NotContains(t, got.Suggestion, "{token}")
			require.Contains(t, got.Suggestion, tt.suggests)
			require.NotContains(t, got.Summary, "\n", "a summary is one line")
			require.Equal(t, analysis.RefinedByRules, got.RefinedBy)
		})
	}
}

func TestClassifyBoundsTheSummary(t *testing.T) {
	t.Parallel()
	got := analysis.Classify("fatal: "+strings.Repeat("x", 5000), 1, false)
	require.Equal(t, analysis.CategoryUnknown, got.Category)
	require.LessOrEqual(t, len([]rune(got.Summary)), 200)
	require.True(t, strings.HasSuffix(got.Summary, `…"`), got.Summary)
}

func BenchmarkClassifyLongOutput(b *testing.B) {
	output := strings.Repeat("npm WARN deprecated inflight@1.0.6: This module is not supported\n", 1000) +
		"npm ERR! code ENOENT\nnpm ERR! syscall open\nnpm ERR! path /srv/app/package.json\n"
	for b.Loop() {
		analysis.Classify(output, 254, false)
	}
}
