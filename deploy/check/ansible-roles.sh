#!/bin/bash
# Run by make deploy-check: applies site.yml's Mandible, Thorax and agent plays
# (deploy/ansible/roles/mantis_*) with Ansible's chroot connection to four fresh
# Debian 12 roots (debootstrap --variant=minbase bookworm): Mandible's, Thorax's,
# a poll agent's running as the user mantis-agent and a listen agent's running as
# root. Twice: the second run has to report changed=0 for each. Then it checks
# what the roles left inside the roots: the binaries, the mantis group and the
# agent's user, the certificates' modes, the units, and each configuration
# loading with its daemon's check-config run under chroot. Also
# ansible-playbook --syntax-check of site.yml (which takes in the broker role's
# team and debian install paths), and the broker role's team apt sources applied
# to a root of their own and read by its apt.
#
# Service management is off (mantis_manage_service=false: no systemd runs in a
# chroot), and so is become (no sudo in minbase; the check runs as root). The
# machine itself is left as it was: the roots live in a temporary directory that is
# removed on exit, failure included, and the check compares /etc/mantis, the
# binaries in /usr/local/bin and the mantis group before and after.
#
# The root comes from a tarball cached under $MANTIS_CACHE_DIR (make passes
# .mantis/cache), keyed by the suite, the variant and the extra packages; the
# first run builds it with debootstrap from deb.debian.org (about 2 minutes).
# Environment: MANTIS_BIN (default bin/), MANTIS_CACHE_DIR, DEBIAN_MIRROR.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "${MANTIS_BIN:-$repo/bin}" && pwd)
cache=${MANTIS_CACHE_DIR:-$repo/.mantis/cache}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
variant=minbase
# What the roles need in the root besides minbase: Python for Ansible's modules.
packages=python3
# Neither Ansible nor the daemons' check-config (which names stray MANTIS_*
# variables) need these.
unset MANTIS_BIN MANTIS_CACHE_DIR

[ "$(id -u)" -eq 0 ] || { echo "ansible-roles.sh: run as root (chroot)"; exit 1; }
command -v debootstrap >/dev/null || { echo "debootstrap missing: make deploy-tools installs it"; exit 1; }
for b in mandible thorax agent mantisctl; do
	[ -x "$bin/$b" ] || { echo "$bin/$b missing: make build"; exit 1; }
done

work=$(mktemp -d /tmp/mantis-ansible-roles.XXXXXX)
cleanup() {
	# debootstrap mounts /proc and /sys in the root it builds and may leave them
	# there when it fails: unmount whatever is under $work (deepest first), and
	# remove $work only once nothing is.
	awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
		umount -l "$m" || true
	done
	if awk -v w="$work/" 'index($2, w) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
		echo "ansible-roles.sh: mounts left under $work; not removing it" >&2
		return
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The host's state the roles must not touch.
host_state() {
	for p in /etc/mantis /usr/local/bin/mandible /usr/local/bin/thorax /usr/local/bin/agent \
		/etc/systemd/system/mantis-mandible.service /etc/systemd/system/mantis-thorax.service \
		/etc/systemd/system/mantis-agent.service; do
		if [ -e "$p" ]; then stat -c '%n %s %Y %a %U %G' "$p"; else echo "$p absent"; fi
	done
	getent group mantis || echo "group mantis absent"
	getent passwd mantis-agent || echo "user mantis-agent absent"
}
host_state > "$work/host-before"

# The cached root, built once per key.
key=$(printf '%s\n' "$suite" "$variant" "$packages" "$mirror" | sha256sum | cut -c1-12)
tarball=$cache/debootstrap-$suite-$variant-$key.tar.gz
if [ ! -s "$tarball" ]; then
	mkdir -p "$cache"
	echo "building the $suite $variant root (debootstrap, once per package list)"
	debootstrap --variant="$variant" --include="${packages// /,}" "$suite" "$work/build" "$mirror" \
		> "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log"; exit 1; }
	rm -f "$work"/build/var/cache/apt/archives/*.deb
	tar -C "$work/build" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
	rm -rf "$work/build"
fi
# Each root and the daemon installed in it: web-1 is a poll agent running as the
# user mantis-agent, web-2 a listen agent running as root (the unit's default).
roots=(mandible thorax agent agent-listen)
daemons=(mandible thorax agent agent)
for r in "${roots[@]}"; do
	mkdir "$work/$r"
	tar -C "$work/$r" -xzf "$tarball"
done

# Certificates, the API token file and the secrets the roles install.
"$bin/mantisctl" dev certs --dir "$work/certs" --issue agent/web-1 --issue agent/web-2 > /dev/null
"$bin/mantisctl" token create --name deploy-check --scope admin | sed -n '/^\[\[tokens\]\]/,$p' > "$work/tokens.toml"
grep -q '^sha256 = ' "$work/tokens.toml"
cat > "$work/inventory.ini" <<INI
[broker]

[mandible]
mandible-1 ansible_host=$work/mandible

[thorax]
thorax-1 ansible_host=$work/thorax

[agents]
web-1 ansible_host=$work/agent mantis_agent_user=mantis-agent
web-2 ansible_host=$work/agent-listen mantis_agent_mode=listen

[all:vars]
ansible_connection=community.general.chroot
ansible_python_interpreter=/usr/bin/python3
ansible_become=false
INI
cat > "$work/vars.json" <<JSON
{
  "mantis_binary_dir": "$bin",
  "mantis_certs_src": "$work/certs",
  "mantis_manage_service": false,
  "mantis_mandible_tokens_src": "$work/tokens.toml",
  "mantis_mandible_database_url": "postgres://mantis:deploy-check@db.example.com:5432/mantis?sslmode=verify-full",
  "mantis_mandible_temporal_address": "temporal.example.com:7233",
  "mantis_mandible_queue_host": "rabbitmq.example.com",
  "rabbitmq_mandible_password": "deploy-check-mandible",
  "mantis_thorax_mandible_address": "mandible.example.com:9090",
  "mantis_thorax_queue_host": "rabbitmq.example.com",
  "rabbitmq_thorax_password": "deploy-check-thorax",
  "mantis_agent_thorax_address": "thorax.example.com:9190",
  "mantis_agent_labels": {"env": "check", "zone": "a"}
}
JSON

export ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_FORCE_COLOR=0
ansible-playbook -i "$repo/deploy/ansible/inventory.example.ini" --syntax-check "$repo/deploy/ansible/site.yml"

hosts=(mandible-1 thorax-1 web-1 web-2)
play() {
	ansible-playbook -i "$work/inventory.ini" -e "@$work/vars.json" "$repo/deploy/ansible/site.yml" \
		> "$work/play-$1.log" 2>&1 || { cat "$work/play-$1.log"; echo "run $1 of site.yml failed"; exit 1; }
	sed -n '/^PLAY RECAP/,$p' "$work/play-$1.log"
}
play 1
for h in "${hosts[@]}"; do
	grep -Eq "^$h +: ok=[0-9]+ +changed=[1-9][0-9]* +unreachable=0 +failed=0" "$work/play-1.log" || {
		echo "first run: $h changed nothing or failed"; exit 1; }
done
play 2
for h in "${hosts[@]}"; do
	grep -Eq "^$h +: ok=[0-9]+ +changed=0 +unreachable=0 +failed=0" "$work/play-2.log" || {
		grep -B3 -E '^(changed|--- before)' "$work/play-2.log" || true
		echo "second run: $h is not idempotent (changed != 0)"; exit 1; }
done

# What the roles left in each root.
fail() { echo "ansible-roles.sh: $*"; exit 1; }
# A path's mode and owners as the root names them (its own /etc/group).
mode() { chroot "$1" stat -c '%a %U:%G' "$2"; }
for i in "${!roots[@]}"; do
	r=${roots[$i]}
	d=${daemons[$i]}
	root=$work/$r
	[ -x "$root/usr/local/bin/$d" ] || fail "$r: /usr/local/bin/$d is not executable"
	cmp -s "$bin/$d" "$root/usr/local/bin/$d" || fail "$r: /usr/local/bin/$d is not bin/$d"
	cmp -s "$repo/deploy/systemd/mantis-$d.service" "$root/etc/systemd/system/mantis-$d.service" ||
		fail "$r: /etc/systemd/system/mantis-$d.service is not deploy/systemd's"
	chroot "$root" getent group mantis > /dev/null || fail "$r: no group mantis"
	[ "$(mode "$root" /etc/mantis)" = "750 root:mantis" ] || fail "$r: /etc/mantis is $(mode "$root" /etc/mantis)"
	[ "$(mode "$root" "/etc/mantis/$d.toml")" = "640 root:mantis" ] || fail "$r: $d.toml is $(mode "$root" "/etc/mantis/$d.toml")"
	# The configuration the unit reads (/etc/mantis/<name>.toml, the default path).
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$root" "/usr/local/bin/$d" check-config > "$work/check-config-$r.txt" ||
		fail "$r: $d check-config under chroot failed"
	# The units run Mandible and Thorax as DynamicUser accounts: a static account
	# of the same name would replace the dynamic one.
	for u in mantis-mandible mantis-thorax; do
		! chroot "$root" getent passwd "$u" > /dev/null || fail "$r: a static user $u exists"
	done
done
for f in mandible.key mandible.crt ca.crt; do
	[ "$(mode "$work/mandible" "/etc/mantis/certs/$f")" = "640 root:mantis" ] || fail "mandible: certs/$f is $(mode "$work/mandible" "/etc/mantis/certs/$f")"
done
for f in mandible-database-url mandible-queue-password tokens.toml; do
	[ "$(mode "$work/mandible" "/etc/mantis/$f")" = "640 root:mantis" ] || fail "mandible: $f is $(mode "$work/mandible" "/etc/mantis/$f")"
done
grep -q '@db.example.com:5432/mantis' "$work/check-config-mandible.txt" || fail "mandible: check-config does not show the database URL read from url_file"
! grep -q 'deploy-check@' "$work/check-config-mandible.txt" || fail "mandible: check-config prints the database password"
[ "$(mode "$work/thorax" /etc/mantis/thorax-queue-password)" = "640 root:mantis" ] || fail "thorax: queue password file mode"
[ "$(cat "$work/thorax/etc/mantis/thorax-queue-password")" = "deploy-check-thorax" ] || fail "thorax: queue password file content"
agent=$work/agent
chroot "$agent" getent passwd mantis-agent | grep -q ":$(chroot "$agent" getent group mantis | cut -d: -f3):" ||
	fail "agent: no user mantis-agent in group mantis"
grep -qx 'User=mantis-agent' "$agent/etc/systemd/system/mantis-agent.service.d/user.conf" || fail "agent: no User= drop-in"
[ "$(mode "$agent" /etc/mantis/certs/agent-web-1.key)" = "640 root:mantis" ] || fail "agent: key mode $(mode "$agent" /etc/mantis/certs/agent-web-1.key)"
grep -q 'address = "thorax.example.com:9190"' "$work/check-config-agent.txt" || fail "agent: check-config does not show the Thorax address"
grep -q 'cert_path = "/etc/mantis/certs/agent-web-1.crt"' "$work/check-config-agent.txt" || fail "agent: check-config does not show its certificate"
listen=$work/agent-listen
! chroot "$listen" getent passwd mantis-agent > /dev/null || fail "agent-listen: a user mantis-agent exists"
[ ! -e "$listen/etc/systemd/system/mantis-agent.service.d/user.conf" ] || fail "agent-listen: a User= drop-in exists"
[ "$(mode "$listen" /etc/mantis/certs/agent-web-2.key)" = "600 root:mantis" ] || fail "agent-listen: key mode $(mode "$listen" /etc/mantis/certs/agent-web-2.key)"
grep -q '^mode = "listen"' "$work/check-config-agent-listen.txt" || fail "agent-listen: check-config does not show listen mode"
grep -q 'address = "0.0.0.0:9191"' "$work/check-config-agent-listen.txt" || fail "agent-listen: check-config does not show its listen address"

# The broker role's team path as far as this machine can go without reaching
# Team RabbitMQ's repositories: its key, sources and preferences applied to a
# root of its own (tag rabbitmq_apt_sources, twice), then read by the root's apt.
mkdir "$work/broker"
tar -C "$work/broker" -xzf "$tarball"
cat > "$work/team-sources.yml" <<'YAML'
- name: The broker role's team apt sources
  hosts: all
  gather_facts: false
  tasks:
    - name: Apply the key, sources and preferences of rabbitmq_source team
      ansible.builtin.import_role:
        name: rabbitmq
        tasks_from: install-team.yml
YAML
printf 'broker-1 ansible_host=%s ansible_connection=community.general.chroot ansible_python_interpreter=/usr/bin/python3\n' \
	"$work/broker" > "$work/broker.ini"
team() {
	ANSIBLE_ROLES_PATH=$repo/deploy/ansible/roles ansible-playbook -i "$work/broker.ini" --tags rabbitmq_apt_sources \
		"$work/team-sources.yml" > "$work/team-$1.log" 2>&1 || { cat "$work/team-$1.log"; fail "team sources, run $1, failed"; }
}
team 1
grep -Eq '^broker-1 +: ok=[0-9]+ +changed=3 +unreachable=0 +failed=0' "$work/team-1.log" || { cat "$work/team-1.log"; fail "team sources: run 1 did not write the key, sources and preferences"; }
team 2
grep -Eq '^broker-1 +: ok=[0-9]+ +changed=0 +unreachable=0 +failed=0' "$work/team-2.log" || { cat "$work/team-2.log"; fail "team sources: run 2 changed something"; }
inroot() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$@"; }
# What apt update would fetch (printed, not fetched), then the preferences: no
# warning or error from apt, and Debian's rabbitmq-server (the root's only one
# known) is never a candidate.
inroot "$work/broker" apt-get update --print-uris > "$work/team-uris.txt" 2>&1 || { cat "$work/team-uris.txt"; fail "team sources: apt does not read them"; }
for host in deb1 deb2; do
	for repository in rabbitmq-erlang rabbitmq-server; do
		grep -q "^'https://$host.rabbitmq.com/$repository/debian/bookworm/dists/bookworm/InRelease' " "$work/team-uris.txt" ||
			{ cat "$work/team-uris.txt"; fail "team sources: apt would not fetch $host's $repository for bookworm"; }
	done
done
inroot "$work/broker" apt-cache policy rabbitmq-server > "$work/team-policy.txt" 2>&1
! grep -Eq '^(W|E):' "$work/team-policy.txt" || { cat "$work/team-policy.txt"; fail "team sources: apt rejects the preferences"; }
grep -q '^  Candidate: (none)$' "$work/team-policy.txt" || { cat "$work/team-policy.txt"; fail "team sources: Debian's rabbitmq-server is still a candidate"; }
# The key the sources name is the role's (deploy/ansible_test.go checks its fingerprint).
cmp -s "$repo/deploy/ansible/roles/rabbitmq/files/com.rabbitmq.team.asc" "$work/broker/etc/apt/keyrings/com.rabbitmq.team.asc" ||
	fail "team sources: /etc/apt/keyrings/com.rabbitmq.team.asc is not the role's key"

host_state > "$work/host-after"
diff -u "$work/host-before" "$work/host-after" || fail "the roles changed this machine"
echo "ansible roles: mantis_mandible, mantis_thorax, mantis_agent (poll and listen) applied twice to $suite roots (second run changed=0); files, modes, users and check-config verified; the broker role's team apt sources read by apt"
