#!/usr/bin/env sh
# Writes a dated results file of bench/results/ from the report of one run:
#
#   tools/results.sh KIND COMMAND REPORT
#
# prints the path it wrote, bench/results/<date>-<commit>-<KIND>.md, which holds the
# machine (cores, memory, kernel), the load when the run ended, the commit, the
# command and the run's own report (figures and ratios to its same-run baseline).
# The docs link these files and keep only the invariant and the command in prose.
set -eu
kind=$1 command=$2 report=$3
dir=${RESULTS_DIR:-bench/results}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo dev)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)
day=$(date -u +%Y-%m-%d)
out="$dir/$day-$commit-$kind.md"
mkdir -p "$dir"
{
	echo "# $kind, $day, commit $commit${dirty:+ (with uncommitted changes)}"
	echo
	echo "- Command: \`$command\`"
	echo "- Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(go version 2>/dev/null | cut -d' ' -f3-)"
	echo "- Load when the run ended (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	cat "$report"
} > "$out"
echo "$out"
