#!/bin/bash
# Part of make deploy-check, run by ansible-broker.sh inside `mantisctl dev exec`:
# imports deploy/rabbitmq/definitions.json into the stack's broker with rabbitmqctl
# import_definitions, its vhost and users renamed to check-only names and its password
# placeholders filled, then compares what the broker holds (permissions, tags, the
# passwords) with the file, and removes the check's vhost and users.
#
# Needs MANTIS_RABBITMQ_COOKIE_HOME and MANTIS_RABBITMQ_EPMD_PORT (the broker's HOME
# and Erlang port mapper, as ansible-broker.sh finds them) and RABBITMQ_NODENAME.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${RABBITMQ_NODENAME:?} ${MANTIS_RABBITMQ_COOKIE_HOME:?} ${MANTIS_RABBITMQ_EPMD_PORT:?}"
work=$MANTIS_STACK_DIR/deploy-check/definitions
rm -rf "$work" && mkdir -p "$work"
umask 077
ctl() {
	HOME=$MANTIS_RABBITMQ_COOKIE_HOME ERL_EPMD_PORT=$MANTIS_RABBITMQ_EPMD_PORT \
		/usr/lib/rabbitmq/bin/rabbitmqctl -q -n "$RABBITMQ_NODENAME" "$@"
}

# Check-only names: every "mantis..." user becomes "mantis-definitions-check...", the
# vhost "/mantis" becomes "/mantis-definitions-check"; each CHANGE_ME its own password.
prefix=mantis-definitions-check
vhost=/$prefix
jq --arg prefix "$prefix" --arg vhost "$vhost" '
	def rename: sub("^mantis"; $prefix);
	.vhosts |= map(.name = $vhost)
	| .users |= map(.name |= rename)
	| .permissions |= map(.user |= rename | .vhost = $vhost)
' "$repo/deploy/rabbitmq/definitions.json" > "$work/definitions.json"
grep -q '"/mantis"' "$work/definitions.json" && { echo "definitions: the vhost was not renamed"; exit 1; }
for user in $(jq -r '.users[].name' "$work/definitions.json"); do
	head -c 24 /dev/urandom | base64 | tr -d '/+=\n' > "$work/$user.password"
	jq --arg u "$user" --rawfile p "$work/$user.password" \
		'.users |= map(if .name == $u and .password == "CHANGE_ME" then .password = $p else . end)' \
		"$work/definitions.json" > "$work/next.json" && mv "$work/next.json" "$work/definitions.json"
done
grep -q CHANGE_ME "$work/definitions.json" && { echo "definitions: a password placeholder is left"; exit 1; }

cleanup() {
	ctl delete_vhost "$vhost" >/dev/null 2>&1 || true
	for user in $(jq -r '.users[].name' "$work/definitions.json"); do ctl delete_user "$user" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
ctl import_definitions "$work/definitions.json"

# The broker's permissions on the vhost are the file's, user by user.
ctl list_permissions -p "$vhost" --no-table-headers | sort > "$work/permissions.actual"
jq -r '.permissions[] | [.user, .configure, .write, .read] | join("\t")' "$work/definitions.json" | sort > "$work/permissions.want"
diff -u "$work/permissions.want" "$work/permissions.actual" || { echo "definitions: the broker's permissions differ from the file's"; exit 1; }
for user in $(jq -r '.users[].name' "$work/definitions.json"); do
	ctl authenticate_user "$user" "$(cat "$work/$user.password")" >/dev/null || {
		echo "definitions: $user does not authenticate with the password put in place of CHANGE_ME"; exit 1; }
	want_tags=$(jq -r --arg u "$user" '.users[] | select(.name == $u) | .tags | sort | join(",")' "$work/definitions.json")
	got_tags=$(ctl list_users --no-table-headers | awk -F'\t' -v u="$user" '$1 == u { gsub(/[][ ]/, "", $2); print $2 }')
	[ "$got_tags" = "$want_tags" ] || { echo "definitions: $user has tags [$got_tags], the file says [$want_tags]"; exit 1; }
done
echo "definitions: imported into $RABBITMQ_NODENAME; vhost, users, tags and permissions match deploy/rabbitmq/definitions.json"
