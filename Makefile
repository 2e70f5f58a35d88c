# llmfleet.cluster — the two commands are `make demo` and `make test` (see README).
SHELL := /bin/bash
.DEFAULT_GOAL := help
ROOT := $(abspath .)
VENV := $(ROOT)/.venv
BIN := $(VENV)/bin
PY ?= python3
LAB_NODES ?= 6
export LLMFLEET_CACHE ?= $(HOME)/.cache/llmfleet
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.build/collections
export ANSIBLE_FORCE_COLOR ?= 0
export PYTHONDONTWRITEBYTECODE := 1
COLL_LINK := $(ROOT)/.build/collections/ansible_collections/llmfleet/cluster
REQ_STAMP := $(VENV)/.req-$(shell sha256sum requirements-dev.txt | cut -c1-12)

.PHONY: help demo test deps venv link image lab-up lab-down unit sanity lint build molecule clean \
	monitoring-rules integration-controller integration-nccl integration-nccl-full integration-two-clusters integration-container install-test ee-context known-hosts

help:
	@echo "make demo   - bring up the simulated lab and run site.yml on it (all set-up included)"
	@echo "make test   - unit tests, ansible-test sanity, ansible-lint, collection build, molecule"
	@echo "make lab-up / lab-down [LAB_NODES=N]   make unit | sanity | lint | build | molecule"

deps:
	@$(ROOT)/tools/bootstrap.sh

$(REQ_STAMP): requirements-dev.txt
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt
	@rm -f $(VENV)/.req-*; touch $@

venv: deps $(REQ_STAMP)

link:
	@mkdir -p $(dir $(COLL_LINK)); test -L $(COLL_LINK) || ln -sfn $(ROOT) $(COLL_LINK)

image: deps
	$(PY) tools/simlab/simlab.py image

lab-up: image
	$(PY) tools/simlab/simlab.py up --nodes $(LAB_NODES)

lab-down:
	$(PY) tools/simlab/simlab.py down

demo: venv link lab-up
	$(BIN)/ansible-playbook site.yml -i inventories/sim
	@echo; cat reports/summary-sim.txt

# Pin a real inventory's SSH host keys once (first contact: prints the fingerprints to compare).
known-hosts: venv link
	$(BIN)/ansible-playbook playbooks/known_hosts.yml -i $(INVENTORY)

unit: venv link
	$(BIN)/pytest -q tests/unit

sanity: venv
	$(ROOT)/tools/ci/sanity.sh

lint: venv link
	$(BIN)/ansible-lint --profile production

build: venv
	@rm -rf .build/dist .build/installed && mkdir -p .build/dist
	$(BIN)/ansible-galaxy collection build --output-path .build/dist --force
	$(BIN)/ansible-galaxy collection install --force --offline --no-deps -p .build/installed .build/dist/llmfleet-cluster-*.tar.gz
	ANSIBLE_COLLECTIONS_PATH=$(ROOT)/.build/installed $(BIN)/ansible-doc -l llmfleet.cluster
	ANSIBLE_COLLECTIONS_PATH=$(ROOT)/.build/installed $(BIN)/ansible-doc -t role -l llmfleet.cluster

# The collection as a user gets it: the tarball installed in a temporary project (its own ansible.cfg,
# no system collections), ansible-doc of every module/filter/role, every playbook by FQCN, the EE's
# build context, then read-only FQCN runs against the sim lab when it is up (tools/ci/install_test.sh).
install-test: venv
	$(ROOT)/tools/ci/install_test.sh

# The execution environment's build context in .build/ee/context (no container engine needed).
ee-context: build
	@mkdir -p .build/ee && cp .build/dist/llmfleet-cluster-*.tar.gz .build/ee/llmfleet-cluster.tar.gz
	$(BIN)/ansible-builder create -f execution-environment.yml -c .build/ee/context

# Scenarios share one converged lab (see .config/molecule/config.yml).
molecule: molecule-default molecule-fabric molecule-cluster

# (pattern rule, so not .PHONY: make skips implicit rules for phony targets)
molecule-%: venv link lab-up
	$(BIN)/molecule test -s $*

# The monitoring role's alert and recording rules on synthetic series (promtool: Debian's prometheus
# package, installed by tools/bootstrap.sh).
monitoring-rules:
	@command -v promtool > /dev/null || { echo "promtool is not on PATH: run make deps (tools/bootstrap.sh installs Debian's prometheus)"; exit 1; }
	promtool check rules roles/monitoring/files/llmfleet-rules.yml
	promtool test rules tests/promtool/*.test.yml

# Controller-side integration: bad inventories (no host contacted), upgrade batching.
integration-controller: venv link
	$(BIN)/pytest -q --durations=12 tests/integration/preflight tests/integration/upgrade tests/integration/memory_fit tests/integration/serve_preflight tests/integration/models tests/integration/python_env_source tests/integration/engine_patches tests/integration/wheelhouse tests/integration/gpu_render tests/integration/gateway tests/integration/container_gpu

# A real NCCL compile (a subset of its kernels) with CUDA 13.0 nvcc; the full build is opt-in.
integration-nccl: venv link
	tests/integration/nccl/run.sh

integration-nccl-full: venv link
	tests/integration/nccl/run.sh --full

# Opt-in, on the converged sim lab (20-35 min, not in `make test`): the sim re-grouped into two clusters,
# both upgraded by one upgrade.yml run one after the other while the other serves; ends as `make demo` leaves it.
integration-two-clusters: venv link
	LLMFLEET_TWO_CLUSTERS=1 $(BIN)/pytest -q -s tests/integration/upgrade/test_two_clusters_lab.py

# Opt-in (not in `make test`): the sim with spark3 and thor3 able to run containers inside
# (tools/simlab/simlab.py NESTED_CONTAINER_NODES; the first time, both are recreated and converged
# afresh), then the container runtime's checks; ends with both smol replicas back on their venvs
# (docs/containers.md).
integration-container: venv link
	LLMFLEET_SIM_NESTED=1 $(MAKE) demo
	LLMFLEET_CONTAINER_LAB=1 $(BIN)/pytest -q -s tests/integration/container/test_container_lab.py

test: venv link
	$(ROOT)/tools/ci/run_tests.sh

clean: lab-down
	rm -rf .build .cache
