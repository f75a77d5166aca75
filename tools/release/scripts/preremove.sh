#!/bin/sh
# Before the files are removed (not on an upgrade: deb passes "upgrade", rpm 1):
# stop and disable @UNIT@ when systemd runs this host.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
		systemctl disable --now @UNIT@ || true
	fi
	;;
esac
exit 0
