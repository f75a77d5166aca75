#!/bin/sh
# Before the files are unpacked: the mantis system group and user. The units of
# Mandible and Thorax run with Group=mantis and SupplementaryGroups=mantis, and
# certificates under /etc/mantis are made group-readable by mantis. Nothing here
# needs a running systemd.
set -e
if ! getent group mantis >/dev/null 2>&1; then
	groupadd --system mantis
fi
if ! getent passwd mantis >/dev/null 2>&1; then
	useradd --system --gid mantis --no-create-home --home-dir /var/lib/mantis \
		--shell /usr/sbin/nologin --comment "Mantis" mantis
fi
exit 0
