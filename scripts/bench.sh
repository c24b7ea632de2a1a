#!/usr/bin/env bash
# Runs admit's benchmarks against a harness-started redis-server and writes BENCHMARKS.md.
# Every package with benchmarks has one BenchmarkReference* (the bare thing admit wraps); each figure
# is shown beside that reference, measured in the same run, as a ratio of throughputs.
set -euo pipefail
cd "$(dirname "$0")/.."

benchtime=${BENCHTIME:-2s}
# redisstore is measured in the bench module, beside the other Redis clients and limiters.
pkgs=(./memstore ./httplimit)
gotest="go test -run '^\$' -bench . -benchmem -benchtime $benchtime"
cmd="ADMIT_REQUIRE_REDIS=1 $gotest ${pkgs[*]} && (cd bench && ADMIT_REQUIRE_REDIS=1 $gotest .)"
raw=$(mktemp)
kept=$(mktemp)
trap 'rm -f "$raw" "$kept"' EXIT
# Sections of BENCHMARKS.md written by hand (each starting with a "## " heading) are kept as they are,
# after the generated table.
if [ -f BENCHMARKS.md ]; then sed -n '/^## /,$p' BENCHMARKS.md > "$kept"; fi

echo "running: $cmd" >&2
export ADMIT_REQUIRE_REDIS=1
go test -run '^$' -bench . -benchmem -benchtime "$benchtime" "${pkgs[@]}" | tee "$raw" >&2
(cd bench && go test -run '^$' -bench . -benchmem -benchtime "$benchtime" .) | tee -a "$raw" >&2

{
	echo "# Benchmarks"
	echo
	echo "Written by \`make bench\` (scripts/bench.sh) on $(date -u +%Y-%m-%d). Figures are from one run on one machine;"
	echo "compare ratios, not absolute numbers, across machines."
	echo
	echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(free -g | awk '/Mem:/{print $2}') GiB"
	echo "- $(go version)"
	echo "- $(redis-server --version | cut -d' ' -f1-3), started by the test harness on loopback, no persistence"
	echo "- command: \`$cmd\`"
	echo
	echo "*callers* is the number of goroutines calling at once. *vs reference* is this row's throughput"
	echo "divided by the package's reference row with the same callers (1.00 = as fast as the bare reference)."
	echo
	awk '
		/^pkg: / { pkg = $2; sub(/.*\/admit\/?/, "", pkg); if (pkg == "") pkg = "admit" }
		/^Benchmark/ {
			name = $1; sub(/-[0-9]+$/, "", name)
			ns = ""; ops = ""; bop = ""; allocs = ""
			for (i = 3; i < NF; i++) {
				if ($(i+1) == "ns/op") ns = $i
				if ($(i+1) == "decisions/s") ops = $i
				if ($(i+1) == "B/op") bop = $i
				if ($(i+1) == "allocs/op") allocs = $i
			}
			if (ops == "" && ns != "") ops = 1e9 / ns
			callers = name; if (!sub(/.*callers=/, "", callers)) callers = "-"
			bench = name; sub(/\/callers=[0-9]+$/, "", bench)
			n++; P[n] = pkg; B[n] = bench; C[n] = callers; NS[n] = ns; OPS[n] = ops; BOP[n] = bop; AL[n] = allocs
			if (bench ~ /^BenchmarkReference/) REF[pkg, callers] = ops
		}
		END {
			print "| package | benchmark | callers | ns/op | ops/s | B/op | allocs/op | vs reference |"
			print "|---|---|---:|---:|---:|---:|---:|---:|"
			for (i = 1; i <= n; i++) {
				ratio = "—"
				if ((P[i], C[i]) in REF && B[i] !~ /^BenchmarkReference/) ratio = sprintf("%.2f", OPS[i] / REF[P[i], C[i]])
				if (B[i] ~ /^BenchmarkReference/) ratio = "(reference)"
				printf "| %s | %s | %s | %s | %.0f | %s | %s | %s |\n", P[i], substr(B[i], 10), C[i], NS[i], OPS[i], BOP[i], AL[i], ratio
			}
		}
	' "$raw"
	echo
	echo "Rows in *bench* are Redis clients and limiters on one harness-started Redis: admit's redisstore;"
	echo "admit's take script called by bare rueidis (the reference) and by bare go-redis (retries off,"
	echo "default pool); the single-purpose fixed-window script redisstore called before the take script,"
	echo "by bare rueidis (PreviousScriptRueidis: the single-policy path before and after, in one run); and"
	echo "go-redis/redis_rate, a GCRA limiter (another algorithm, one script call per decision). Redis runs"
	echo "on the same 2 cores as the benchmark, so Redis-bound rows measure both."
	if [ -s "$kept" ]; then echo; cat "$kept"; fi
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md" >&2
