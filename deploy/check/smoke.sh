#!/bin/bash
# The smoke deployment of make deploy-check, run by ansible-broker.sh inside
# `mantisctl dev exec`: Mandible, Thorax and a poll agent from bin/ against the
# stack's PostgreSQL and Temporal and against the broker as the Ansible role left
# it (its vhost, its two users), then a two-step deployment that must succeed.
# Afterwards the broker must show the topology Mandible declared in that vhost and
# Thorax's three consumers, which its read-only user could only open there.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${MANTIS_DEPLOY_CHECK_VHOST:?} ${MANTIS_DEPLOY_CHECK_MANDIBLE_USER:?} ${MANTIS_DEPLOY_CHECK_THORAX_USER:?}"
work=$MANTIS_STACK_DIR/deploy-check/smoke
rm -rf "$work" && mkdir -p "$work"
certs=$MANTIS_STACK_DIR/certs
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
http=127.0.0.1:$(free_port) grpc=127.0.0.1:$(free_port) agents=127.0.0.1:$(free_port)
token=$(head -c 24 /dev/urandom | base64 | tr -d '/+=\n')
queue="deploy-check-$$"
broker() { # user password
	cat <<TOML
[queue]
enabled = true
host = "$MANTIS_AMQP_HOST"
port = $MANTIS_AMQP_PORT
username = "$1"
password = "$2"
vhost = "$MANTIS_DEPLOY_CHECK_VHOST"
ca_cert_path = "$MANTIS_CA_CERT"
client_cert_path = "$MANTIS_CLIENT_CERT"
client_key_path = "$MANTIS_CLIENT_KEY"
TOML
}
cat > "$work/mandible.toml" <<TOML
replica_id = "deploy-check"
[database]
url = "$DATABASE_URL"
[temporal]
address = "$TEMPORAL_ADDRESS"
namespace = "${TEMPORAL_NAMESPACE:-default}"
deployment_task_queue = "$queue"
[http]
listen = "$http"
tokens = ["$token"]
[grpc]
listen = "$grpc"
ca_cert_path = "$certs/ca.crt"
cert_path = "$certs/mandible.crt"
key_path = "$certs/mandible.key"
[dispatch]
poll_interval = "2s"
$(broker "$MANTIS_DEPLOY_CHECK_MANDIBLE_USER" "$MANTIS_DEPLOY_CHECK_MANDIBLE_PASSWORD")
TOML
cat > "$work/thorax.toml" <<TOML
name = "thorax"
[mandible]
address = "$grpc"
ca_cert_path = "$certs/ca.crt"
cert_path = "$certs/thorax.crt"
key_path = "$certs/thorax.key"
$(broker "$MANTIS_DEPLOY_CHECK_THORAX_USER" "$MANTIS_DEPLOY_CHECK_THORAX_PASSWORD")
[polling]
interval = "1s"
[heartbeat]
interval = "1s"
[agents]
listen = "$agents"
ca_cert_path = "$certs/ca.crt"
cert_path = "$certs/thorax.crt"
key_path = "$certs/thorax.key"
TOML
# The stack's "agent" pair speaks for the target named "agent".
cat > "$work/agent.toml" <<TOML
name = "agent"
mode = "poll"
[thorax]
address = "$agents"
ca_cert_path = "$certs/ca.crt"
cert_path = "$certs/agent.crt"
key_path = "$certs/agent.key"
[journal]
dir = "$work/journal"
TOML
cat > "$work/spec.yaml" <<YAML
name: deploy-check
targets: [agent]
steps:
  - name: hello
    command: echo hello from the deploy check
    timeout: 30s
  - name: verify
    command: test "\$(echo ok)" = ok
    timeout: 30s
YAML

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
start() { # name
	env -u MANTIS_AMQP_URL "$repo/bin/$1" --config "$work/$1.toml" > "$work/$1.log" 2>&1 &
	pids+=($!)
}
fail() { echo "smoke: $*"; for f in mandible thorax agent; do echo "--- $f.log"; tail -n 30 "$work/$f.log"; done; exit 1; }

start mandible
for _ in $(seq 120); do
	curl -fsS "http://$http/healthz" >/dev/null 2>&1 && break
	kill -0 "${pids[0]}" 2>/dev/null || fail "mandible exited"
	sleep 1
done
curl -fsS "http://$http/healthz" >/dev/null || fail "mandible never became healthy"
start thorax
start agent
export MANTIS_API_URL=http://$http MANTIS_API_TOKEN=$token
# The poll agent registers through Thorax; the deployment names it.
for _ in $(seq 90); do
	"$repo/bin/mantisctl" targets 2>/dev/null | grep -qw agent && break
	sleep 1
done
timeout 180 "$repo/bin/mantisctl" deploy -f "$work/spec.yaml" --watch > "$work/deploy.out" 2>&1 ||
	{ cat "$work/deploy.out"; fail "the smoke deployment did not succeed"; }
cat "$work/deploy.out"

ctl() { HOME=$MANTIS_RABBITMQ_COOKIE_HOME ERL_EPMD_PORT=$MANTIS_RABBITMQ_EPMD_PORT \
	/usr/lib/rabbitmq/bin/rabbitmqctl -q -n "$RABBITMQ_NODENAME" "$@"; }
ctl list_queues -p "$MANTIS_DEPLOY_CHECK_VHOST" name > "$work/queues.txt"
for q in mantis.commands.priority.high mantis.commands.priority.normal mantis.commands.priority.low \
	mantis.analysis.requests mantis.dlq; do
	grep -qx "$q" "$work/queues.txt" || fail "queue $q missing in $MANTIS_DEPLOY_CHECK_VHOST"
done
consumers=$(ctl list_consumers -p "$MANTIS_DEPLOY_CHECK_VHOST" queue_name consumer_tag | grep -c 'mantis\.commands\.priority\..*thorax-' || true)
[ "$consumers" -ge 3 ] || fail "Thorax's read-only user holds $consumers command-queue consumers, not 3"
echo "smoke deployment succeeded on vhost $MANTIS_DEPLOY_CHECK_VHOST as $MANTIS_DEPLOY_CHECK_MANDIBLE_USER and $MANTIS_DEPLOY_CHECK_THORAX_USER"
