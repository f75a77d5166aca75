#!/bin/sh
# systemd-analyze verify of deploy/systemd/*.service. verify wants each ExecStart
# binary where the unit names it (/usr/local/bin/...): in a private mount namespace
# the built binaries of bin/ are bound over /usr/local/bin, so the host's stays
# untouched. verify reports a bad directive on stderr yet exits 0: any output
# fails the check.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for b in mandible thorax agent; do
	cp "$repo/bin/$b" "$tmp/$b"
done
out=$(unshare --mount --propagation private sh -c \
	'mount --bind "$1" /usr/local/bin && systemd-analyze verify "$2"/deploy/systemd/*.service' \
	sh "$tmp" "$repo" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then
	echo "systemd-analyze verify reported:"
	echo "$out"
	exit 1
fi
echo "systemd units verified: $(ls "$repo"/deploy/systemd/*.service | xargs -n1 basename | tr '\n' ' ')"
