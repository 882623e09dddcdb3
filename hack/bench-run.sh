#!/usr/bin/env bash
# bench-run.sh: run one end-to-end benchmark of BENCHMARKS.md once, with the
# machine's load logged beside it, from any clone of the repository.
#
#   hack/bench-run.sh [-o DIR] [-n] NAME BENCHMARK [VAR=value ...]
#
# Builds the shipped binaries (make build, into the clone's bin/) and the e2e
# test binary, then runs BENCHMARK (e.g. BenchmarkContention) once from
# test/e2e with MUSTER_BENCH_BIN=<clone>/bin, MUSTER_BENCH_OUT=DIR/NAME and
# the VAR=value settings (MUSTER_BENCH_*, GODEBUG, ...). Writes:
#
#   DIR/NAME.txt       the go test output, between a first line naming the
#                      commit, nproc and load average and a last line with
#                      the exit status and the load average
#   DIR/NAME.load.txt  the load average every 30 s while it ran
#   DIR/NAME/          what the benchmark writes (CSV, Markdown, SVG, the
#                      shipped binaries' logs, profiles when asked for)
#
# DIR defaults to a new temporary directory (printed). To compare two
# commits, run each clone's own hack/bench-run.sh in turn with the same DIR
# and different NAMEs, alternating, so both see the same machine.
# -n prints the commands instead of running them.
set -euo pipefail

usage() {
	echo 'usage: hack/bench-run.sh [-o DIR] [-n] NAME BENCHMARK [VAR=value ...]' >&2
	exit 2
}

out= dry=
while getopts 'o:n' opt; do
	case $opt in
	o) out=$OPTARG ;;
	n) dry=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || usage
name=$1 bench=$2
shift 2
for kv in "$@"; do
	case $kv in
	[A-Za-z_]*=*) ;;
	*) echo "bench-run.sh: $kv is not VAR=value" >&2; exit 2 ;;
	esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/muster-bench.XXXXXX")
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The Makefile's K8S_LDFLAGS, which every e2e build needs.
ldflags=$(make -s --no-print-directory -C "$root" -f Makefile -f - print-k8s-ldflags <<'EOF'
print-k8s-ldflags:
	@echo '$(K8S_LDFLAGS)'
EOF
)
testbin=$out/e2e.test

run() {
	if [ -n "$dry" ]; then
		printf '%q ' "$@"
		echo
	else
		"$@"
	fi
}

run make -C "$root" build
run go -C "$root" test -c -o "$testbin" -ldflags "$ldflags" ./test/e2e/

if [ -n "$dry" ]; then
	echo "cd $root/test/e2e && env MUSTER_BENCH_BIN=$root/bin MUSTER_BENCH_OUT=$out/$name $* \\"
	echo "  $testbin -test.v -test.run '^\$' -test.bench '^$bench\$' -test.benchtime 1x -test.benchmem -test.timeout 120m > $out/$name.txt"
	exit 0
fi

load() { echo "$(date -u +%H:%M:%S) $(cat /proc/loadavg)"; }
(
	trap 'kill "$s" 2>/dev/null; exit 0' TERM
	while :; do
		load
		sleep 30 &
		s=$!
		wait "$s"
	done
) >"$out/$name.load.txt" &
loadpid=$!
trap 'kill "$loadpid" 2>/dev/null || true' EXIT

commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
set +e
{
	rc=0
	echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) start $name commit=$commit nproc=$(nproc) load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "env: $*"
	cd "$root/test/e2e"
	env MUSTER_BENCH_BIN="$root/bin" MUSTER_BENCH_OUT="$out/$name" "$@" \
		"$testbin" -test.v -test.run '^$' -test.bench "^$bench\$" -test.benchtime 1x -test.benchmem -test.timeout 120m 2>&1 || rc=$?
	echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) end $name rc=$rc load $(cut -d' ' -f1-3 /proc/loadavg)"
	exit "$rc"
} | grep --line-buffered -v '"logger":"etcd-client"' >"$out/$name.txt"
rc=${PIPESTATUS[0]}
set -e
echo "$out/$name.txt"
exit "$rc"
