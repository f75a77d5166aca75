#!/bin/sh
# Runs native Go fuzz targets one after another, each for FUZZTIME: go test -fuzz takes
# one target per invocation. Arguments are package:Target pairs, e.g.
# internal/contract/spec:FuzzParse. Inputs that fail are written under the package's
# testdata/fuzz/<Target>/ (commit them: plain go test then runs them for good).
# Every target runs even when one fails; the exit status says whether any did.
set -u
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
# go test minimizes each new interesting input for up to 60 s by default, trying
# nothing new meanwhile, and a minimization still under way when FUZZTIME ends is
# reported as "context deadline exceeded": keep it short.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
if [ $# -eq 0 ]; then
	echo "fuzz.sh: no package:Target given" >&2
	exit 2
fi
failed=""
for pair in "$@"; do
	pkg=${pair%%:*}
	target=${pair##*:}
	echo "== $pkg $target ($FUZZTIME)"
	if ! "$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "./$pkg"; then
		failed="$failed $pair"
	fi
done
if [ -n "$failed" ]; then
	echo "fuzz targets that failed:$failed"
	exit 1
fi
echo "every fuzz target passed"
