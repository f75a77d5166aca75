#!/bin/sh
# Prepares the Compose installation in this directory: certificates in certs/,
# passwords, the API token, the payload codec key and the rendered configurations
# in secrets/. Run it once, as root (it gives each file to the uid of the
# container that reads it), from a checkout with bin/mantisctl built (make build):
#
#   sudo deploy/compose/setup.sh && cd deploy/compose && docker compose up -d
#
# It keeps what exists: a second run renews nothing but expiring certificates.
# Replace certs/ by your own PKI's files of the same names for production trust.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
mantisctl=${MANTISCTL:-$here/../../bin/mantisctl}
cd "$here"
umask 077
mkdir -p certs secrets

# Server certificates name every service host; each Thorax and agent has a pair of
# its own, whose identity (spiffe://mantis/<role>/<name>) is its name.
"$mantisctl" dev certs --dir certs \
	--host localhost,127.0.0.1,mandible-1,mandible-2,rabbitmq,thorax-1,thorax-2,agent-1,agent-2 \
	--issue thorax/thorax-1 --issue thorax/thorax-2 \
	--issue agent/agent-1 --issue agent/agent-2 >/dev/null

secret() { # name: a random secret, kept once made
	[ -s "secrets/$1" ] || head -c 32 /dev/urandom | base64 | tr -d '/+=\n' > "secrets/$1"
}
secret postgres_password
secret rabbitmq_mandible_password
secret rabbitmq_thorax_password
[ -s secrets/codec_keys ] || printf 'k1 %s\n' "$(head -c 32 /dev/urandom | base64)" > secrets/codec_keys
if [ ! -s secrets/api_tokens ]; then
	"$mantisctl" token create --name admin --scope admin > secrets/admin_token.out
	grep -v '^#' secrets/admin_token.out | sed -n '/^\[\[tokens\]\]/,$p' > secrets/api_tokens
	grep '^mantis_' secrets/admin_token.out > secrets/admin_token
	rm secrets/admin_token.out
fi

render() { # template output
	sed -e "s|@POSTGRES_PASSWORD@|$(cat secrets/postgres_password)|g" \
		-e "s|@RABBITMQ_MANDIBLE_PASSWORD@|$(cat secrets/rabbitmq_mandible_password)|g" \
		-e "s|@RABBITMQ_THORAX_PASSWORD@|$(cat secrets/rabbitmq_thorax_password)|g" "$1" > "$2"
}
render config/mandible.toml.in secrets/mandible.toml
render config/thorax.toml.in secrets/thorax.toml
cp config/agent.toml.in secrets/agent.toml
# The broker's definitions: the shipped ones with the generated passwords, in order
# of the users (mantis, then mantis-thorax).
awk -v m="$(cat secrets/rabbitmq_mandible_password)" -v t="$(cat secrets/rabbitmq_thorax_password)" \
	'/"password": "CHANGE_ME"/ { n++; sub(/CHANGE_ME/, n == 1 ? m : t) } { print }' \
	../rabbitmq/definitions.json > secrets/rabbitmq_definitions
printf 'POSTGRES_PWD=%s\n' "$(cat secrets/postgres_password)" > secrets/temporal.env

# Mantis runs as 65532 (distroless nonroot), RabbitMQ as 999, PostgreSQL reads its
# password file as root before dropping privileges.
if [ "$(id -u)" = 0 ]; then
	chown -R 65532:65532 certs secrets
	chown 999:999 certs/rabbitmq.key secrets/rabbitmq_definitions
fi
chmod 0644 certs/*.crt
echo "certificates in $here/certs, secrets in $here/secrets (the admin API token: secrets/admin_token)"
