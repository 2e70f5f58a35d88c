#!/usr/bin/env bash
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# Installs what the controller needs on a fresh Debian 12 machine (as root). Idempotent and quiet
# when everything is already there: `make` calls it before every demo/test run.
set -euo pipefail
# openssh-server: the models fan-out test runs an sshd per network-namespace node (not started here);
# ccache: the NCCL integration test's compiler cache (tests/integration/nccl/run.sh);
# prometheus: promtool, for the monitoring rules' tests (make monitoring-rules)
# package:command pairs. A package counts as there only when dpkg has it installed ("ii": `dpkg -s`
# also answers 0 for a removed package whose config files remain) and its command is on the PATH (a
# restored machine can hold dpkg's record without the files): otherwise it is (re)installed.
PKGS="podman:podman runc:runc debootstrap:debootstrap iproute2:ip iputils-ping:ping openssh-client:ssh
openssh-server:/usr/sbin/sshd rsync:rsync jq:jq xz-utils:xz zstd:zstd dpkg-dev:dpkg-source ccache:ccache
prometheus:promtool"
missing=""
for pair in $PKGS; do
  p=${pair%%:*} cmd=${pair#*:}
  if [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)" != "ii " ] || ! command -v "$cmd" >/dev/null; then
    missing="$missing $p"
  fi
done
if [ -n "$missing" ]; then
  echo "[bootstrap] apt-get install:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends --reinstall $missing >/dev/null
  # only promtool is wanted here: the package's own server (its postinst starts it on every address
  # where systemd runs) is stopped and disabled when this script installed it
  case " $missing " in
    *" prometheus "*) if [ -d /run/systemd/system ]; then systemctl disable --now prometheus.service >/dev/null 2>&1 || true; fi ;;
  esac
fi
# cgroups v1 hybrid: crun fails here, runc works (see README "simulated lab").
if ! grep -qs '^runtime *= *"runc"' /etc/containers/containers.conf; then
  mkdir -p /etc/containers
  printf '[engine]\nruntime = "runc"\n' >> /etc/containers/containers.conf
fi
