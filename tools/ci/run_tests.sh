#!/usr/bin/env bash
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# `make test`: every suite, each step's own runner output shown; the last line counts steps. A
# failed step does not hide the others' results, and the exit code is non-zero.
#
# Three lanes share the machine. The lab lane (the lab, then the molecule scenarios) runs at normal
# priority: its checks time engine loads and recoveries. The controller lane (unit tests, then the
# controller-side integration tests) runs beside it from the start, also at normal priority, and ends
# during the cluster converge. The build lane (ansible-lint, the collection build, ansible-test
# sanity, the NCCL compile) is CPU work with no clock in it: it runs at idle CPU and I/O priority
# (SCHED_IDLE, ionice idle). Priorities order the controller's own processes only: the lab's
# containers are other cgroups, which the kernel shares the CPU with by cgroup weight, so a side lane
# takes CPU from the nodes whenever it runs (docs/testing.md has the runs that showed it). The side
# lanes' output is printed when the lab lane is done. LLMFLEET_TEST_LANES=1 runs everything in one
# lane, in order; TEST_STEPS="a b" runs just those steps, in one lane.
set -uo pipefail
cd "$(dirname "$0")/../.."
LAB_LANE=(lab-up molecule-default install-test molecule-fabric molecule-cluster)
CONTROLLER_LANE=(unit integration-controller)
BUILD_LANE=(lint build sanity integration-nccl)
if [ -n "${TEST_STEPS:-}" ]; then
  read -r -a LAB_LANE <<< "$TEST_STEPS"; CONTROLLER_LANE=(); BUILD_LANE=()
elif [ "${LLMFLEET_TEST_LANES:-3}" = 1 ]; then
  LAB_LANE=("${BUILD_LANE[@]}" "${CONTROLLER_LANE[@]}" "${LAB_LANE[@]}"); CONTROLLER_LANE=(); BUILD_LANE=()
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

# side_lane NAME [idle] STEP...: runs the steps in order in the background, each step's output in
# $LOGS/STEP.log; sets lane_pid
side_lane() {
  local name=$1 idle=$2; shift 2
  (
    if [ "$idle" = idle ]; then
      # lowered before the first fork: every process of the lane inherits it
      chrt --idle -p 0 "$BASHPID" && renice -n 19 -p "$BASHPID" > /dev/null && ionice -c 3 -p "$BASHPID"
    fi
    # the lane's own fact cache: its playbook runs never share cached facts with the lab's
    export ANSIBLE_CACHE_PLUGIN_CONNECTION=$PWD/.build/facts-$name-lane
    for s in "$@"; do step "$s" > "$LOGS/$s.log" 2>&1; done
  ) &
  lane_pid=$!
  echo "=== $name lane ($idle priority, logs in $LOGS): $*"
}
side_pids=()
if [ "${#CONTROLLER_LANE[@]}" -gt 0 ]; then
  side_lane controller normal "${CONTROLLER_LANE[@]}"; side_pids+=("$lane_pid")
fi
if [ "${#BUILD_LANE[@]}" -gt 0 ]; then
  side_lane build idle "${BUILD_LANE[@]}"; side_pids+=("$lane_pid")
fi

for s in "${LAB_LANE[@]}"; do step "$s"; done

if [ "${#side_pids[@]}" -gt 0 ]; then
  echo "=== waiting for the side lanes (+$(( $(date +%s) - start ))s)"
  wait "${side_pids[@]}"
  for s in "${CONTROLLER_LANE[@]}" "${BUILD_LANE[@]}"; do cat "$LOGS/$s.log"; done
fi
echo "=== summary (controller and build lane steps ran beside the lab lane)"
cat "$LOGS/results"
failed=$(grep -c ' FAILED ' "$LOGS/results")
passed=$(grep -c ' ok ' "$LOGS/results")
echo "total: $(( $(date +%s) - start ))s"
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
