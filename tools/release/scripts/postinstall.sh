#!/bin/sh
# After the files are unpacked: systemd learns of @UNIT@ when systemd runs this
# host; in a chroot, in a container or on a host not booted with systemd the
# install succeeds all the same. The unit is not enabled: edit @CONFIG@ first,
# then systemctl enable --now @UNIT@. An upgrade restarts the unit if it runs.
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
	systemctl try-restart @UNIT@ || true
fi
exit 0
