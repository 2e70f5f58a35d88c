#!/usr/bin/env bash
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# `make test`: every suite in order, each step's own runner output shown; the last line counts
# steps. A failed step does not hide the others' results, and the exit code is non-zero.
set -uo pipefail
cd "$(dirname "$0")/../.."
STEPS=(unit lint build sanity integration-controller integration-nccl molecule-default install-test molecule-fabric molecule-cluster)
[ -n "${TEST_STEPS:-}" ] && read -r -a STEPS <<< "$TEST_STEPS"
passed=0; failed=0; report=()
# CI kills a run after 90 min with nothing reported: cluster checks that would start later than
# LLMFLEET_TEST_BUDGET_S after this point are skipped with a TIME BUDGET reason (0: no deadline).
start=$(date +%s)
budget=${LLMFLEET_TEST_BUDGET_S:-4800}
if [ "$budget" -gt 0 ]; then export LLMFLEET_TEST_DEADLINE=$((start + budget)); fi
# The lab (apt packages, debootstrap node image, containers) is mostly download and disk work: it
# is built in the background while the controller-side steps use the CPU, and the first molecule
# step waits for it (molecule-% depends on lab-up, which then finds the lab up). Its log is kept.
lab_pid=""
if printf '%s\n' "${STEPS[@]}" | grep -q '^molecule'; then
  # the lab is up for these steps: install-test's runs against it must not be skipped
  export LLMFLEET_INSTALL_TEST_LAB=${LLMFLEET_INSTALL_TEST_LAB:-1}
fi
if printf '%s\n' "${STEPS[@]}" | grep -q '^molecule'; then
  mkdir -p .build
  echo "=== make lab-up (background, log .build/lab-up.log)"
  lab_t0=$(date +%s)
  make --no-print-directory lab-up > .build/lab-up.log 2>&1 &
  lab_pid=$!
fi
for step in "${STEPS[@]}"; do
  if [ -n "$lab_pid" ] && [[ "$step" == molecule* ]]; then
    if wait "$lab_pid"; then lab_res=ok; else lab_res="FAILED (the molecule step retries it; log below)"; fi
    echo "=== lab-up (background): $lab_res after $(( $(date +%s) - lab_t0 ))s"
    [ "$lab_res" = ok ] || tail -n 40 .build/lab-up.log
    lab_pid=""
  fi
  echo "=== make $step"
  t0=$(date +%s)
  if make --no-print-directory "$step"; then passed=$((passed + 1)); res=ok; else failed=$((failed + 1)); res=FAILED; fi
  report+=("$(printf '%-24s %-6s %5ss' "$step" "$res" $(( $(date +%s) - t0 )))")
done
echo "=== summary"
printf '%s\n' "${report[@]}"
echo "total: $(( $(date +%s) - start ))s"
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
