#!/usr/bin/env bash
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# `make test`: every suite, each step's own runner output shown; the last line counts steps. A
# failed step does not hide the others' results, and the exit code is non-zero.
#
# Two lanes share the machine. The lab lane (unit and controller integration tests, then the lab and
# the molecule scenarios) runs at normal priority: its checks time engine loads and recoveries.
# The build lane (ansible-lint, the collection build, ansible-test sanity, the NCCL compile) is
# CPU work with no clock in it: it runs at idle CPU and I/O priority (SCHED_IDLE, ionice idle),
# so it only takes the cycles the lab lane leaves while it waits on restarts, Ray and engines.
# Its output is printed when the lab lane is done. LLMFLEET_TEST_LANES=1 runs everything in one
# lane, in order; TEST_STEPS="a b" runs just those steps, in one lane.
set -uo pipefail
cd "$(dirname "$0")/../.."
LAB_LANE=(unit integration-controller lab-up molecule-default install-test molecule-fabric molecule-cluster)
BUILD_LANE=(lint build sanity integration-nccl)
lanes=${LLMFLEET_TEST_LANES:-2}
if [ -n "${TEST_STEPS:-}" ]; then
  read -r -a LAB_LANE <<< "$TEST_STEPS"; BUILD_LANE=(); lanes=1
elif [ "$lanes" = 1 ]; then
  LAB_LANE=("${BUILD_LANE[@]}" "${LAB_LANE[@]}"); BUILD_LANE=()
fi
LOGS=.build/test-logs
mkdir -p "$LOGS" && rm -f "$LOGS"/*
# CI kills a run after 90 min with nothing reported: cluster checks that would start later than
# LLMFLEET_TEST_BUDGET_S after this point are skipped with a TIME BUDGET reason (0: no deadline).
start=$(date +%s)
budget=${LLMFLEET_TEST_BUDGET_S:-4800}
if [ "$budget" -gt 0 ]; then export LLMFLEET_TEST_DEADLINE=$((start + budget)); fi
if printf '%s\n' "${LAB_LANE[@]}" | grep -q '^molecule'; then
  # the lab is up for these steps: install-test's runs against it must not be skipped
  export LLMFLEET_INSTALL_TEST_LAB=${LLMFLEET_INSTALL_TEST_LAB:-1}
fi

# step NAME: runs `make NAME`, appends "name result seconds" to $LOGS/results
step() {
  local t0 res
  t0=$(date +%s)
  echo "=== make $1 (started at +$((t0 - start))s)"
  if make --no-print-directory "$1"; then res=ok; else res=FAILED; fi
  printf '%-24s %-6s %5ss\n' "$1" "$res" $(( $(date +%s) - t0 )) >> "$LOGS/results"
}

# The lab (apt packages, the debootstrap node image, containers) is mostly download and disk work:
# it starts at once, beside the unit and controller tests; `make lab-up` in the lab lane then finds
# it up (or retries and shows why not).
lab_pid=""
if printf '%s\n' "${LAB_LANE[@]}" | grep -q '^lab-up$'; then
  make --no-print-directory lab-up > "$LOGS/lab-up-early.log" 2>&1 &
  lab_pid=$!
fi

build_pid=""
if [ "${#BUILD_LANE[@]}" -gt 0 ]; then
  (
    # lowered before the first fork: every process of the lane inherits it
    chrt --idle -p 0 "$BASHPID" && renice -n 19 -p "$BASHPID" > /dev/null && ionice -c 3 -p "$BASHPID"
    # the lane's own fact cache: its playbook runs never share cached facts with the lab's
    export ANSIBLE_CACHE_PLUGIN_CONNECTION=$PWD/.build/facts-build-lane
    for s in "${BUILD_LANE[@]}"; do step "$s" > "$LOGS/$s.log" 2>&1; done
  ) &
  build_pid=$!
  echo "=== build lane (idle priority, logs in $LOGS): ${BUILD_LANE[*]}"
fi

for s in "${LAB_LANE[@]}"; do
  if [ "$s" = lab-up ] && [ -n "$lab_pid" ]; then
    wait "$lab_pid" || echo "=== the early lab-up failed (log below); make lab-up retries it"
    cat "$LOGS/lab-up-early.log"
    lab_pid=""
  fi
  step "$s"
done

if [ -n "$build_pid" ]; then
  echo "=== waiting for the build lane (+$(( $(date +%s) - start ))s)"
  wait "$build_pid"
  for s in "${BUILD_LANE[@]}"; do cat "$LOGS/$s.log"; done
fi
echo "=== summary (build lane steps ran beside the lab lane)"
cat "$LOGS/results"
failed=$(grep -c ' FAILED ' "$LOGS/results")
passed=$(grep -c ' ok ' "$LOGS/results")
echo "total: $(( $(date +%s) - start ))s"
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
