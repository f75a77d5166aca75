#!/bin/bash
# Runs inside `mantisctl dev exec` (make deploy-check): applies the Ansible role
# deploy/ansible/roles/rabbitmq to the throw-away stack's broker twice, the second
# run having to report changed=0, imports deploy/rabbitmq/definitions.json under
# check-only names (definitions-import.sh), then runs the smoke deployment (smoke.sh)
# as the role's users on the role's vhost.
#
# The broker is the stack's own node: the role reaches it with rabbitmqctl, whose
# port mapper and Erlang cookie are read from the broker process's environment.
# The listener configuration is written for real, to a file under the stack
# directory rather than the broker's own (which would need a restart the stack does
# not support); package install and service management are off, and the source
# is named (rabbitmq_source=debian: the stack runs Debian's RabbitMQ 3.10), since
# the role's default, team, is what it does not run. site.yml's other plays find
# no hosts here.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${RABBITMQ_NODENAME:?run under mantisctl dev exec}"
work=$MANTIS_STACK_DIR/deploy-check
mkdir -p "$work"
umask 077

# The broker's environment, from the beam process started with this node name.
environ=
for f in /proc/[0-9]*/environ; do
	if tr '\0' '\n' < "$f" 2>/dev/null | grep -qx "RABBITMQ_NODENAME=$RABBITMQ_NODENAME"; then
		environ=$(tr '\0' '\n' < "$f")
		break
	fi
done
[ -n "$environ" ] || { echo "no process of broker node $RABBITMQ_NODENAME"; exit 1; }
epmd_port=$(echo "$environ" | sed -n 's/^ERL_EPMD_PORT=//p')
cookie_home=$(echo "$environ" | sed -n 's/^HOME=//p')
# Debian's /usr/sbin/rabbitmqctl switches to the rabbitmq user and its own HOME;
# the real CLI is used with the broker's cookie instead.
rabbitmq_bin=/usr/lib/rabbitmq/bin

# The role's users and vhost for this check: its own names, so the stack's users
# stay as they are, and the vhost given through amqps_vhost.
vhost=/mantis-deploy-check
mandible_user=mantis-deploy-check
thorax_user=mantis-deploy-check-thorax
for s in mandible thorax; do
	[ -s "$work/$s-password" ] || head -c 24 /dev/urandom | base64 | tr -d '/+=\n' > "$work/$s-password"
done
cat > "$work/vars.json" <<JSON
{
  "amqps_vhost": "$vhost",
  "rabbitmq_mandible_user": "$mandible_user",
  "rabbitmq_mandible_password": "$(cat "$work/mandible-password")",
  "rabbitmq_thorax_user": "$thorax_user",
  "rabbitmq_thorax_password": "$(cat "$work/thorax-password")",
  "rabbitmq_node": "$RABBITMQ_NODENAME",
  "rabbitmq_ctl_environment": {"HOME": "$cookie_home", "ERL_EPMD_PORT": "$epmd_port", "PATH": "$rabbitmq_bin:$PATH"},
  "rabbitmq_source": "debian",
  "rabbitmq_install": false,
  "rabbitmq_manage_service": false,
  "rabbitmq_conf_path": "$work/rabbitmq.conf",
  "rabbitmq_hosts": "localhost"
}
JSON
rm -f "$work/rabbitmq.conf"

play() {
	ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_HOST_PATTERN_MISMATCH=ignore \
		ansible-playbook -i localhost, -c local -e "@$work/vars.json" "$repo/deploy/ansible/site.yml" | tee "$work/play-$1.log"
}
play 1
grep -Eq 'localhost +: ok=[0-9]+ +changed=[1-9]' "$work/play-1.log" || { echo "first run changed nothing"; exit 1; }
play 2
grep -Eq 'localhost +: ok=[0-9]+ +changed=0 +unreachable=0 +failed=0' "$work/play-2.log" || {
	echo "second run of the role is not idempotent (changed != 0)"; exit 1; }
grep -qx 'listeners.tcp = none' "$work/rabbitmq.conf"
grep -qx 'listeners.ssl.default = 5671' "$work/rabbitmq.conf"

# What the role left on the broker, as rabbitmqctl sees it.
ctl() { HOME=$cookie_home ERL_EPMD_PORT=$epmd_port "$rabbitmq_bin/rabbitmqctl" -q -n "$RABBITMQ_NODENAME" "$@"; }
ctl list_permissions -p "$vhost" | tee "$work/permissions.txt"
grep -qF "$thorax_user	^\$	^\$	^mantis\\.commands\\.priority\\.(high|normal|low)\$" "$work/permissions.txt"
grep -qF "$mandible_user	.*	.*	.*" "$work/permissions.txt"

# The shipped definitions.json, imported under check-only names, holds the same.
MANTIS_RABBITMQ_COOKIE_HOME=$cookie_home MANTIS_RABBITMQ_EPMD_PORT=$epmd_port \
	"$repo/deploy/check/definitions-import.sh"

MANTIS_RABBITMQ_COOKIE_HOME=$cookie_home MANTIS_RABBITMQ_EPMD_PORT=$epmd_port \
MANTIS_DEPLOY_CHECK_VHOST=$vhost MANTIS_DEPLOY_CHECK_MANDIBLE_USER=$mandible_user \
MANTIS_DEPLOY_CHECK_MANDIBLE_PASSWORD=$(cat "$work/mandible-password") \
MANTIS_DEPLOY_CHECK_THORAX_USER=$thorax_user \
MANTIS_DEPLOY_CHECK_THORAX_PASSWORD=$(cat "$work/thorax-password") \
	"$repo/deploy/check/smoke.sh"
