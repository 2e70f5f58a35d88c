#!/usr/bin/env bash
# `make test`: every suite in order, each step's own runner output shown; the last line counts
# steps. A failed step does not hide the others' results, and the exit code is non-zero.
set -uo pipefail
cd "$(dirname "$0")/../.."
STEPS=(unit lint build sanity integration-controller integration-nccl molecule-default molecule-fabric molecule-cluster)
[ -n "${TEST_STEPS:-}" ] && read -r -a STEPS <<< "$TEST_STEPS"
passed=0; failed=0; report=()
for step in "${STEPS[@]}"; do
  echo "=== make $step"
  t0=$(date +%s)
  if make --no-print-directory "$step"; then passed=$((passed + 1)); res=ok; else failed=$((failed + 1)); res=FAILED; fi
  report+=("$(printf '%-24s %-6s %5ss' "$step" "$res" $(( $(date +%s) - t0 )))")
done
echo "=== summary"
printf '%s\n' "${report[@]}"
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
