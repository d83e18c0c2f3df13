#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module (or of the packages given)
# for a while and prints each target's executions and their total: the
# figure issue 18 asks for (>= 10 M executions per decoder target in total
# over the long runs).
#
#   scripts/fuzz.sh                 # every target, 30 s each
#   scripts/fuzz.sh --long          # every target, 10 min each
#   scripts/fuzz.sh ./psp/...       # the targets under psp
#   FUZZTIME=2m FUZZ_PARALLEL=2 scripts/fuzz.sh ./nvme
#
# New interesting inputs stay in Go's fuzz cache; a failing input is
# written under the package's testdata/fuzz and the run fails.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-30s}
if [ "${1:-}" = "--long" ]; then
	fuzztime=${FUZZTIME:-10m}
	shift
fi
parallel=${FUZZ_PARALLEL:-1}
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)

total=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for dir in $(go list -f '{{.Dir}}' "${pkgs[@]}"); do
	rel=./${dir#"$PWD"/}
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		if ! go test -run '^$' -fuzz "^$f\$" -fuzztime "$fuzztime" -parallel "$parallel" "$rel" >"$log" 2>&1; then
			cat "$log"
			echo "FAIL $rel $f"
			exit 1
		fi
		n=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | awk '{print $2}')
		n=${n:-0}
		total=$((total + n))
		printf '%-24s %-28s %12d execs\n' "$rel" "$f" "$n"
	done
done
printf '%-53s %12d execs\n' "total" "$total"
