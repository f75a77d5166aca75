package analysis

import "regexp"

var re = regexp.MustCompile

// rules are tried in order. The order encodes precedence when an output shows several
// symptoms: what kills a run (memory, disk) comes before what it reports, a rejected
// login before the generic "permission denied" its message contains, a missing command
// or library before the "No such file or directory" that comes with it, and network
// failures before the generic "timed out".
var rules = []rule{
	{
		category: CategoryOutOfMemory,
		keywords: []string{"memory", "oom", "killed"},
		patterns: []pattern{
			{name: "java", re: re(`java\.lang\.OutOfMemoryError(?::\s*(.+))?`), label: "Java out of memory"},
			{name: "node", re: re(`(?i)JavaScript heap out of memory`), label: "Node.js heap out of memory",
				suggestion: "Raise Node's heap (NODE_OPTIONS=--max-old-space-size=<MiB>) if the target has the memory, or reduce what the step loads at once."},
			{name: "oom_killer", re: re(`(?i)out of memory: kill(?:ed)? process \d+ \(([^)]+)\)`), label: "killed by the OOM killer"},
			{name: "oom_killed", re: re(`\bOOMKilled\b|(?i)\boom[-_ ]kill`), label: "killed by the OOM killer"},
			{name: "out_of_memory", re: re(`(?i)\bout of memory\b`), label: "out of memory"},
			{name: "cannot_allocate", re: re(`(?i)cannot allocate memory`), label: "cannot allocate memory"},
			{name: "python", re: re(`^\s*MemoryError\b`), label: "Python MemoryError"},
			// bash reports a SIGKILLed child as "Killed" or "line 1:  4242 Killed   cmd args".
			{name: "killed", re: re(`(?:^|:)\s*(?:\d+\s+)?Killed(?:\s+(\S.*?))?\s*$`), label: "killed (likely out of memory)"},
		},
		suggestion: "Give the target more memory or run fewer things at once on it; check `dmesg` or the " +
			"journal for the OOM killer's report on {token}.",
		noun:     "the process",
		exitCode: 137,
		// A SIGKILL the agent did not send for a timeout is almost always the kernel's.
		exitLabel: "killed by SIGKILL (exit code 137), likely out of memory",
	},
	{
		category: CategoryDiskFull,
		keywords: []string{"space", "enospc", "quota"},
		patterns: []pattern{
			{name: "enospc", re: re(`(?i)no space left on device|\bENOSPC\b`), label: "no space left on device"},
			{name: "quota", re: re(`(?i)disk quota exceeded`), label: "disk quota exceeded"},
			{name: "apt", re: re(`(?i)(?:don't|do not) have enough free space in (\S+?)\.?$`), label: "not enough free space in"},
		},
		token: subjectBefore,
		suggestion: "Free space on the filesystem holding {token} (`df -h`; old releases, logs, container images " +
			"and package caches are the usual culprits) or grow it.",
		noun: "the written path",
	},
	{
		category: CategoryAuthentication,
		keywords: []string{"auth", "publickey", "could not read", "denied", "401", "403", "credentials", "password"},
		patterns: []pattern{
			{name: "ssh_publickey", re: re(`(?i)permission denied \(publickey[^)]*\)`), label: "SSH key rejected",
				suggestion: "Install the agent user's SSH public key for {token} (authorized_keys or the forge's deploy keys), or point ssh at the right key."},
			{name: "git", re: re(`(?i)authentication failed for '([^']+)'`), label: "authentication failed"},
			{name: "git_no_credentials", re: re(`(?i)could not read (?:username|password) for '([^']+)'`), label: "no credentials for",
				suggestion: "Give the agent credentials for {token} (a credential helper, a token in the remote URL from a secret, or an SSH remote with a deploy key): commands run without a terminal to prompt on."},
			{name: "postgres", re: re(`(?i)password authentication failed for user "([^"]+)"`), label: "database login failed for user"},
			{name: "mysql", re: re(`(?i)access denied for user '([^']+)'`), label: "database login failed for user"},
			{name: "http_401", re: re(`(?i)\b401\b.*\bunauthori[sz]ed\b|\bunauthori[sz]ed\b.*\b401\b|(?:\bhttp(?:/[\d.]+)?|\bstatus(?: code)?|\bresponse code|\berror)[: ]+401\b`),
				label: "unauthorized (HTTP 401)"},
			{name: "http_403", re: re(`(?i)\b403\b.*\bforbidden\b|\bforbidden\b.*\b403\b|(?:\bhttp(?:/[\d.]+)?|\bstatus(?: code)?|\bresponse code|\berror)[: ]+403\b`),
				label: "forbidden (HTTP 403)"},
			{name: "registry", re: re(`(?i)(?:^|: )unauthorized: (.+)`), label: "unauthorized"},
			{name: "registry_denied", re: re(`(?i)denied: requested access to the resource is denied`), label: "registry denied access"},
			{name: "credentials", re: re(`(?i)invalid (?:username or password|credentials)|bad credentials|incorrect password`), label: "invalid credentials"},
			{name: "failed", re: re(`(?i)\bauthentication (?:failed|failure|required)\b|\bauth(?:entication)? error\b`), label: "authentication failed"},
		},
		token: func(line string, at int) string {
			if u := urlIn(line, at); u != "" {
				return u
			}
			return subjectBefore(line, at)
		},
		suggestion: "Check the credentials the step uses for {token}: present in the agent's environment, " +
			"not expired, and allowed to do this.",
		noun: "the service",
	},
	{
		// A script saved with Windows line endings names "interpreter\r", which does not
		// exist: the kernel's "No such file or directory" must not hide the cause.
		category: CategorySyntaxError,
		keywords: []string{"bad interpreter"},
		patterns: []pattern{
			{name: "crlf", re: re(`^(?:\S+: )?(?:line \d+: )?([^:]+): [^:]*\r: bad interpreter`), label: "script has Windows (CRLF) line endings"},
		},
		suggestion: "Convert {token} to Unix line endings (dos2unix, or `git config core.autocrlf input` where it is checked out).",
		noun:       "the script",
	},
	{
		category: CategoryCommandNotFound,
		keywords: []string{"not found", "not recognized", "bad interpreter", "no such file"},
		patterns: []pattern{
			{name: "interpreter", re: re(`^(?:\S+: )?(?:line \d+: )?[^:]+: ([^:]+): bad interpreter`), label: "interpreter not found",
				suggestion: "Install {token} on the target or fix the script's #! line to name an interpreter it has."},
			{name: "env", re: re(`\benv: ['‘"]?([^'’":\s]+)['’"]?: No such file or directory`), label: "interpreter not found",
				suggestion: "Install {token} on the target or fix the script's #! line to name an interpreter it has."},
			{name: "zsh", re: re(`(?i)command not found: (\S+)`), label: "command not found"},
			{name: "bash", re: re(`([^\s:'"]+): command not found`), label: "command not found"},
			// dash (/bin/sh on Debian and Ubuntu): "sh: 1: kubectl: not found".
			{name: "sh", re: re(`^(?:\S+: )?\d+: ([^\s:]+): not found\s*$`), label: "command not found"},
			{name: "exec", re: re(`exec: "([^"]+)": executable file not found`), label: "command not found"},
			{name: "ubuntu", re: re(`(?i)^command '([^']+)' not found`), label: "command not found"},
			{name: "windows", re: re(`'([^']+)' is not recognized as an internal or external command`), label: "command not found"},
		},
		suggestion: "Install {token} on the target, or call it by its full path: the agent runs commands " +
			"non-interactively, so a PATH set up by a login shell does not apply.",
		noun: "the command",
	},
	{
		category: CategoryMissingDependency,
		keywords: []string{"module", "package", "satisfies", "shared librar", "no such file", "cannot load", "gem", "argument", "404"},
		patterns: []pattern{
			{name: "python", re: re(`No module named '?([\w.]+)'?`), label: "missing Python module"},
			{name: "pip", re: re(`(?i)could not find a version that satisfies the requirement (\S+)`), label: "no matching Python package"},
			{name: "node", re: re(`(?i)cannot find module '([^']+)'`), label: "missing Node.js module"},
			{name: "go", re: re(`cannot find package "([^"]+)"`), label: "missing Go package"},
			{name: "go_module", re: re(`no required module provides package ([^\s;]+)`), label: "missing Go package"},
			{name: "shared_library", re: re(`error while loading shared libraries: ([^:]+):`), label: "missing shared library"},
			{name: "header", re: re(`fatal error: ([\w./+-]+\.h(?:pp)?): No such file or directory`), label: "missing header file"},
			{name: "ruby", re: re(`cannot load such file -- (\S+)`), label: "missing Ruby library"},
			{name: "gem", re: re(`(?i)could not find gem '([^']+)'`), label: "missing Ruby gem"},
			{name: "apt", re: re(`(?i)unable to locate package (\S+)`), label: "package not found"},
			{name: "yum", re: re(`(?i)no package (\S+) available`), label: "package not found"},
			{name: "dnf", re: re(`(?i)no match for argument: (\S+)`), label: "package not found"},
			{name: "npm", re: re(`(?i)404 not found - GET https?://registry\.npmjs\.org/(\S+)`), label: "npm package not found"},
			{name: "package", re: re(`(?i)\bpackage '?([\w.+-]+)'? (?:was )?not found`), label: "package not found"},
			{name: "package_generic", re: re(`(?i)\bpackage not found:?\s*(\S*)`), label: "package not found"},
		},
		suggestion: "Install {token} on the target, or add it to the project's dependencies and install " +
			"them in a step before this one.",
		noun: "the missing dependency",
	},
	{
		category: CategoryNetworkUnreachable,
		keywords: []string{"resolv", "resolu", "no such host", "name or service", "getaddrinfo", "refused", "route", "unreach", "timed out", "timeout", "reset", "connect"},
		patterns: []pattern{
			{name: "resolve", re: re(`(?i)could not resolve host(?:name)?:? ([^\s:]+)`), label: "cannot resolve host"},
			{name: "lookup", re: re(`lookup ([^\s:]+)(?: on \S+)?: no such host`), label: "cannot resolve host"},
			{name: "resolve_name", re: re(`(?i)([^\s:'"]+): (?:name or service not known|temporary failure in name resolution)`), label: "cannot resolve host"},
			{name: "name_resolution", re: re(`(?i)temporary failure in name resolution|name or service not known|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)`), label: "name resolution failed"},
			{name: "refused", re: re(`(?i)connection refused|\bECONNREFUSED\b`), label: "connection refused"},
			{name: "no_route", re: re(`(?i)no route to host|\bEHOSTUNREACH\b`), label: "no route to host"},
			{name: "unreachable", re: re(`(?i)network is unreachable|\bENETUNREACH\b`), label: "network unreachable"},
			{name: "connect_timeout", re: re(`(?i)connection timed out|connect(?:ion)? timeout|\bETIMEDOUT\b|dial tcp [^:]+:\d+: i/o timeout`), label: "connection timed out"},
			{name: "reset", re: re(`(?i)connection reset by peer|\bECONNRESET\b`), label: "connection reset"},
			{name: "connect", re: re(`(?i)(?:failed|unable|could not) to connect to`), label: "cannot connect"},
		},
		token: hostIn,
		suggestion: "Check that {token} is up and reachable from the target: DNS, firewall rules, proxy " +
			"settings (HTTP_PROXY in the agent's environment) and that the service listens there.",
		noun: "the remote host",
	},
	{
		category: CategoryPermissionDenied,
		keywords: []string{"root", "superuser", "denied", "eacces", "permitted", "eperm"},
		patterns: []pattern{
			{name: "root", re: re(`(?i)are you root\?|must be (?:run as )?root|requires? root|superuser privileges|root privileges? (?:is |are )?required`),
				label:      "root privileges required",
				suggestion: "Run the step with the privileges it needs (sudo with a NOPASSWD rule for exactly this command), or act on files the agent's user owns."},
			{name: "docker_socket", re: re(`(?i)permission denied while trying to connect to the docker daemon socket at ([^\s:]+://[^\s:]+)`),
				label:      "permission denied on the Docker socket",
				suggestion: "Add the agent's user to the docker group (or run the step with sudo), then restart the agent so it picks up the group."},
			{name: "denied", re: re(`(?i)permission denied|\bEACCES\b`), label: "permission denied"},
			{name: "not_permitted", re: re(`(?i)operation not permitted|\bEPERM\b`), label: "operation not permitted"},
			{name: "windows", re: re(`(?i)access is denied`), label: "access denied"},
		},
		token: func(line string, at int) string {
			if s := subjectBefore(line, at); s != "" {
				return s
			}
			// Node names the file after the message: "EACCES: permission denied, open '/x'".
			if m := quoted.FindStringSubmatch(line[at:]); m != nil {
				return firstGroup(m)
			}
			return ""
		},
		suggestion: "Give the agent's user access to {token} (owner, group or mode), or run the step with " +
			"the privileges it needs.",
		noun: "the file",
	},
	{
		category: CategoryFileNotFound,
		keywords: []string{"no such file", "enoent", "cannot find the", "does not exist", "file not found"},
		patterns: []pattern{
			// Python and Node name the file after the message.
			{name: "enoent", re: re(`(?i)no such file or directory(?::|,)\s*(?:open|stat|lstat|scandir|access|chdir|mkdir|unlink|rename)?\s*'([^']+)'`), label: "no such file or directory"},
			{name: "no_such_file", re: re(`(?i)no such file or directory|\bENOENT\b`), label: "no such file or directory"},
			{name: "windows", re: re(`(?i)cannot find the (?:file|path) specified`), label: "file not found"},
			{name: "does_not_exist", re: re(`(?i)\b(?:file|directory|path) ['"]?([^'"\s]+?)['"]? does not exist`), label: "does not exist"},
			{name: "file_not_found", re: re(`(?i)\bfile not found\b:?\s*['"]?([^'"\s]*)`), label: "file not found"},
		},
		token: subjectBefore,
		suggestion: "Check that {token} exists on the target: a previous step may not have created it, or " +
			"the step runs in another working directory than you expect.",
		noun: "the path",
	},
	{
		category: CategorySyntaxError,
		keywords: []string{"syntax", "unexpected eof", "yaml:", "invalid character", "parse error"},
		patterns: []pattern{
			{name: "shell", re: re("syntax error near unexpected token `([^']*)'"), label: "shell syntax error near unexpected token"},
			{name: "shell_eof", re: re("unexpected EOF while looking for matching `(.)'"), label: "shell syntax error: unmatched"},
			{name: "shell_eof_plain", re: re(`(?i)syntax error: unexpected end of file`), label: "shell syntax error: unexpected end of file"},
			{name: "yaml", re: re(`\byaml: (line \d+: .+)`), label: "YAML syntax error"},
			{name: "json", re: re(`invalid character '(.+?)' (?:looking for|after|in)`), label: "invalid JSON at character"},
			{name: "language", re: re(`\bSyntaxError: (.+)`), label: "syntax error"},
			{name: "parse", re: re(`(?i)\bparse error\b[:,]?\s*(.*)`), label: "parse error"},
			{name: "syntax", re: re(`(?i)\bsyntax error\b[:,]?\s*(.*)`), label: "syntax error"},
		},
		suggestion: "Fix the syntax of the step's command or of the file it reads; mind quoting and escaping, " +
			"as the command goes through a non-interactive shell.",
	},
	{
		category: CategoryTimeout,
		keywords: []string{"timed out", "timeout", "deadline"},
		patterns: []pattern{
			{name: "timed_out", re: re(`(?i)\btimed out\b|\btimeout expired\b`), label: "timed out"},
			{name: "deadline", re: re(`(?i)deadline exceeded`), label: "deadline exceeded"},
		},
		suggestion: "Find out why the operation was slow (load, an unreachable dependency, a lock) or raise " +
			"the timeout of the tool that gave up.",
	},
}

// exitRules classify by exit code alone when no line says more: the shell's codes for
// a command it could not find (127) or could not execute (126).
var exitRules = []rule{
	{
		category:  CategoryCommandNotFound,
		exitCode:  127,
		exitLabel: "command not found (exit code 127)",
		suggestion: "Install the command on the target, or call it by its full path: the agent runs " +
			"commands non-interactively, so a PATH set up by a login shell does not apply.",
	},
	{
		category:   CategoryPermissionDenied,
		exitCode:   126,
		exitLabel:  "command found but not executable (exit code 126)",
		suggestion: "Make the script executable (chmod +x) and check its interpreter line, or run it through its interpreter (sh script.sh).",
	},
}
