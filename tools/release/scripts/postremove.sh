#!/bin/sh
# After the files are removed: systemd forgets the unit when it runs this host.
# The mantis user and group stay, as files they own may.
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
exit 0
