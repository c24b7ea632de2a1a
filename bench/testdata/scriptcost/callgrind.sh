#!/usr/bin/env bash
# callgrind.sh SCRIPT.lua NKEYS ARG... — machine instructions per EVALSHA of SCRIPT, counted by
# callgrind inside evalShaCommand only, on live keys: 1,024 keys rl:x:{0..1023}:<i> (i < NKEYS),
# 4,096 warm-up calls not counted, then 2,048 counted calls, redis-benchmark -c 1 -P 16.
# SETUP (optional, env) is a redis-benchmark command run before the warm-up (e.g. a take that a
# settle or release then works on). Prints the instructions per call.
set -euo pipefail
script=$1 nkeys=$2; shift 2
P=${PORT:-7400}
d=$(mktemp -d)
valgrind --tool=callgrind --callgrind-out-file=$d/out --toggle-collect=evalShaCommand \
  redis-server --port $P --save '' --appendonly no --dir $d >/dev/null 2>&1 &
vg=$!
until redis-cli -p $P PING >/dev/null 2>&1; do sleep 0.2; done
sha=$(redis-cli -p $P SCRIPT LOAD "$(cat "$script")")
keys=()
for ((i = 0; i < nkeys; i++)); do keys+=("rl:x:{__rand_int__}:$i"); done
if [[ -n ${SETUP_SCRIPT:-} ]]; then
  ssha=$(redis-cli -p $P SCRIPT LOAD "$(cat "$SETUP_SCRIPT")")
  # shellcheck disable=SC2086
  redis-benchmark -p $P -c 1 -n 8192 -P 16 -r 1024 -q EVALSHA $ssha $SETUP_ARGS >/dev/null
fi
redis-benchmark -p $P -c 1 -n 4096 -P 16 -r 1024 -q EVALSHA "$sha" "$nkeys" "${keys[@]}" "$@" >/dev/null
callgrind_control -z $vg >/dev/null
redis-cli -p $P CONFIG RESETSTAT >/dev/null
redis-benchmark -p $P -c 1 -n 2048 -P 16 -r 1024 -q EVALSHA "$sha" "$nkeys" "${keys[@]}" "$@" >/dev/null
calls=$(redis-cli -p $P INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
err=$(redis-cli -p $P INFO errorstats | tr -d '\r' | grep -c errorstat || true)
callgrind_control -d $vg >/dev/null
redis-cli -p $P SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait $vg 2>/dev/null || true
total=$(awk '/^summary:|^totals:/ {print $2; exit}' $d/out.1)
[[ -z ${KEEP:-} ]] || cp $d/out.1 "$KEEP"
rm -rf "$d"
if [[ $err != 0 ]]; then echo "$((total / calls)) (the script replied errors)"; else echo $((total / calls)); fi
