#!/usr/bin/env bash
# all.sh DIR — callgrind.sh for every row of the script-cost table (BENCHMARKS.md, "Redis CPU per decision"), on the
# scripts dump.go wrote to DIR. Prints "row<TAB>instructions per call<TAB>ratio to the minimal script".
# ONLY=regex runs the rows whose name matches. A row's fifth field, when there is one, is the rate and
# burst of an override that override_setup.lua stores first at every key rl:x:{n}:1 (the policy's
# override key: KEYS[2]).
set -euo pipefail
dir=$1
here=$(dirname "$0")
M=1000000000000000 H=3600000 D=86400000
rows=(
  "minimal|$here/../minimal_fixed_window.lua|1|$M $H 1"
  "take fixed_window|$dir/take.lua|1|1 '' '' fixed_window $M $H 1 0"
  "take fixed_window aligned|$dir/take.lua|1|1 '' '' fixed_window $M $H 1 1"
  "take sliding_window|$dir/take.lua|1|1 '' '' sliding_window $M $H 1"
  "take sliding_log|$dir/take.lua|1|1 '' '' sliding_log 10000 $H 1"
  "take gcra|$dir/take.lua|1|1 '' '' gcra 1000 $H 1 1000000"
  "take concurrency|$dir/take.lua|1|1 '' '' concurrency 100000 $H 1 12345678901234567"
  "take 2 policies|$dir/take.lua|2|2 '' '' fixed_window $M $H 1 0 fixed_window $M $D 1 0"
  "take 3 policies|$dir/take.lua|3|3 '' '' fixed_window $M $H 1 0 sliding_window $M $H 1 gcra 1000 $H 1 1000000"
  "take 3 fixed windows|$dir/take.lua|3|3 '' '' fixed_window $M 60000 1 0 fixed_window $M $H 1 0 fixed_window $M $D 1 0"
  "take fixed_window shadow|$dir/take.lua|1|1 '' 1 fixed_window $M $H 1 0"
  "take 2 policies, one shadow|$dir/take.lua|2|2 '' 01 fixed_window $M $H 1 0 fixed_window $M $D 1 0"
  "take fixed_window, override key, none set|$dir/take.lua|2|1 '' 2 fixed_window $M $H 1 0"
  "take fixed_window, override set|$dir/take.lua|2|1 '' 2 fixed_window $M $H 1 0|$M 0"
  "take gcra, override key, none set|$dir/take.lua|2|1 '' 2 gcra 1000 $H 1 1000000"
  "take gcra, override set|$dir/take.lua|2|1 '' 2 gcra 1000 $H 1 1000000|2000 1000000"
  "take sliding_window, override key, none set|$dir/take.lua|2|1 '' 2 sliding_window $M $H 1"
  "take sliding_window, override set|$dir/take.lua|2|1 '' 2 sliding_window $M $H 1|$M 0"
  "take fixed_window aligned, override key, none set|$dir/take.lua|2|1 '' 2 fixed_window $M $H 1 1"
  "take fixed_window aligned, override set|$dir/take.lua|2|1 '' 2 fixed_window $M $H 1 1|$M 0"
  "take sliding_log, override key, none set|$dir/take.lua|2|1 '' 2 sliding_log 10000 $H 1"
  "take sliding_log, override set|$dir/take.lua|2|1 '' 2 sliding_log 10000 $H 1|10000 0"
  "take concurrency, override key, none set|$dir/take.lua|2|1 '' 2 concurrency 100000 $H 1 12345678901234567"
  "take concurrency, override set|$dir/take.lua|2|1 '' 2 concurrency 100000 $H 1 12345678901234567|100000 0"
  "take 3 policies, override keys, none set|$dir/take.lua|6|3 '' 2 fixed_window $M $H 1 0 sliding_window $M $H 1 gcra 1000 $H 1 1000000"
  "release|$dir/release.lua|1|12345678901234567"
  "settle fixed_window overrun|$dir/settle.lua|1|fixed_window $M $H 2 0 0 3"
  "settle gcra overrun|$dir/settle.lua|1|gcra 1000 $H 2 1000000 0 3"
  "settle sliding_window overrun|$dir/settle.lua|1|sliding_window $M $H 2 0 3"
  "settle sliding_log overrun|$dir/settle.lua|1|sliding_log 10000 $H 2 0 3"
)
ref=
for row in "${rows[@]}"; do
  IFS='|' read -r name script nkeys args setup <<<"$row"
  [[ $name == minimal || -z ${ONLY:-} || $name =~ $ONLY ]] || continue
  eval "set -- $args"
  if [[ -n $setup ]]; then
    n=$(SETUP_SCRIPT=$here/override_setup.lua SETUP_ARGS="1 rl:x:{__rand_int__}:1 $setup" \
      "$here/callgrind.sh" "$script" "$nkeys" "$@" 2>/dev/null | tail -1)
  else
    n=$("$here/callgrind.sh" "$script" "$nkeys" "$@" 2>/dev/null | tail -1)
  fi
  [[ -n $ref ]] || ref=$n
  printf '%s\t%s\t%s\n' "$name" "$n" "$(awk -v a="$n" -v b="$ref" 'BEGIN{printf "%.2f", a/b}')"
done
