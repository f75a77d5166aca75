#!/bin/sh
# Runs native Go fuzz targets one after another, each for FUZZTIME: go test -fuzz takes
# one target per invocation. Arguments are package:Target pairs, e.g.
# internal/spec:FuzzParse. Inputs that fail are written under the package's
# testdata/fuzz/<Target>/ (commit them: plain go test then runs them for good).
# Every target runs even when one fails; the exit status says whether any did.
set -u
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
# Minimizing a new input through a real server is slow; a long minimization at the
# end of FUZZTIME is reported by go test as a failure of its own.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
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
