#!/usr/bin/env bash
# Runs admit's benchmarks against harness-started redis-servers and writes BENCHMARKS.md and the chart
# docs/bench-throughput.svg (`make bench`; no running Redis needed, only redis-server on PATH).
#
#   BENCHTIME=2s  go test's -benchtime for the throughput benchmarks (with 2s the whole run took under 4 minutes
#                 on 2 busy cores on 2026-11-30; keep it under ~15 minutes as benchmarks are added)
#   COUNT=1       go test's -count; with more, every figure is the median of the runs
#
# The raw output goes to internal/tools/benchreport, which writes one table per comparison group of each
# package and a chart of decisions/s against callers for each group. Everything in BENCHMARKS.md from its
# first "## " heading on is written by hand and kept as it is; the rest is regenerated.
#
# Naming rule (how benchreport groups and compares benchmarks):
# - Benchmark<Group>_<Series> belongs to comparison group <Group> of its package; the group's reference is
#   Benchmark<Group>_Reference<Name>. A benchmark without an underscore belongs to the package's default
#   group, whose reference is BenchmarkReference<Name>.
# - Concurrency is the last path element, /callers=N (internal/callers: N in 1, 16, 256). Other sub-benchmark
#   elements (/alg=gcra, /keys=hot) are part of the series name.
# - Every other series is shown as its throughput (decisions/s, else 10^9 / ns/op) divided by the reference's
#   at the same callers, from the same run. With several reference series in a group (e.g. one per
#   /keys=…), a row is compared with the most specific one whose sub-benchmark elements it shares.
# - Extra figures (b.ReportMetric: redis-cpu-us/op, B/key, p99-us, …) become columns, whatever their unit.
# - The first paragraph of each benchmark's doc comment is printed under its table.
set -euo pipefail
cd "$(dirname "$0")/.."

benchtime=${BENCHTIME:-2s}
count=${COUNT:-1}
export ADMIT_REQUIRE_REDIS=1 # a Redis benchmark that cannot start its server fails rather than skips

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
raw=$tmp/raw.txt
# Build the generator first: a compile error should not cost a full run.
go build -o "$tmp/benchreport" ./internal/tools/benchreport

cmds=()
quote() { case $1 in *[!A-Za-z0-9_./=:,-]*) printf "'%s'" "$1" ;; *) printf '%s' "$1" ;; esac; }
# bench DIR ARG…: runs `go test ARG…` in DIR, appends its output to $raw and records the command for the header.
bench() {
	local dir=$1 shown="ADMIT_REQUIRE_REDIS=1 go test" a
	shift
	for a in "$@"; do shown+=" $(quote "$a")"; done
	if [ "$dir" != . ]; then shown="(cd $dir && $shown)"; fi
	cmds+=(-cmd "$shown")
	echo "running: $shown" >&2
	(cd "$dir" && go test "$@") | tee -a "$raw" >&2
}

flags=(-run '^$' -benchmem -count "$count")
# In-process: memstore (beside a bare sharded map; its key flood) and the HTTP middleware.
bench . "${flags[@]}" -bench . -skip KeyMemory -benchtime "$benchtime" ./memstore ./httplimit
# Memory per key for each algorithm, in memstore (live heap of 2^20 keys) and in Redis (MEMORY USAGE): one
# iteration, since they measure bytes, not time (memstore's takes seconds). redisstore's Take is measured in
# the bench module, beside the other Redis clients and limiters.
bench . "${flags[@]}" -bench KeyMemory -benchtime 1x ./memstore ./redisstore
# The bench module (its own go.mod): redisstore beside bare rueidis, go-redis, redis_rate, in-process peers.
bench bench "${flags[@]}" -bench . -skip '^BenchmarkService' -benchtime "$benchtime" .
# The service (the bench module's Service groups): admit serve beside envoyproxy/ratelimit's service (built in
# compat/envoyrl/refsvc) and a bare net/http handler, each a process on its own redis-server, loaded by admit
# bench's engine; each series one load of $benchtime.
bench bench "${flags[@]}" -bench '^BenchmarkService' -benchtime "$benchtime" .

"$tmp/benchreport" -in "$raw" -o BENCHMARKS.md -svg docs/bench-throughput.svg "${cmds[@]}"
echo "wrote BENCHMARKS.md and docs/bench-throughput.svg" >&2
