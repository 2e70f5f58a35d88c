"""The serve role's memory fit, run on this machine (connection local): no lab, no engine.

nodea (ray_head) and nodeb (ray_workers) are both this machine, declared GB10 (sm_121, unified
memory: the fit reads MemTotal) with RoCE, so the planner accepts TP=2 across them. The refusing
case runs the whole serve role and proves nothing after the preflight ran (no unit probed, stopped
or started); the fitting cases run only the preflight (the sim's CPU profile, as on the sim lab).

Run: .venv/bin/pytest tests/integration/memory_fit -q
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import localplay  # noqa: E402  (tests/integration, shared with the other local-play tests)

ROOT = localplay.ROOT
GIB = 1 << 30


def mem_total_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024 / GIB
    raise AssertionError("no MemTotal in /proc/meminfo")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    localplay.link_collection()
    work = tmp_path_factory.mktemp("memfit")
    localplay.serve_pair(work)
    (work / "whole_role.yml").write_text(yaml.safe_dump([{
        "name": "Serve (whole role)", "hosts": "ray_head:ray_workers", "gather_facts": False,
        "roles": [{"role": "llmfleet.cluster.serve"}]}]))
    return work


def play(work: Path, playbook: str, extra: dict, *args: str) -> tuple[int, str]:
    base = {"common_applied": True, "ansible_become": False, "serve_flag_check": False,
            "serve_firewall": False, "serve_state": "started"}
    env = localplay.ansible_env(work, ANSIBLE_FORCE_COLOR="0")
    return localplay.run_playbook(work / playbook, work / "hosts.yml", {**base, **extra}, *args, env=env)


def flat(text: str) -> str:
    return " ".join(text.split())


def memfit_line(out: str, host: str) -> str:
    found = re.search(rf"MEMFIT (\w+) {host}: (.*?)(?:\"|$)", flat(out))
    assert found, out[-3000:]
    return found.group(0)


def test_refuses_before_anything_is_stopped_or_started(work):
    """Llama-3.3-70B bf16 at TP=2 needs ~66 GiB of weights per node: this machine cannot hold it."""
    # backend mp: every rank renders its own command here (with ray only the head does)
    extra = {"llmfleet_serve_profile": "llama-3.3-70b-vllm-tp2",
             "llmfleet_serve_profiles_extra": {"llama-3.3-70b-vllm-tp2": {"backend": "mp"}}}
    rc, out = play(work, "whole_role.yml", extra)
    text = flat(out)
    assert rc == 2, out[-4000:]
    for host in ("nodea", "nodeb"):
        assert f"MEMFIT refuse {host}: llama-3.3-70b-vllm-tp2 TP=2 PP=1 max-model-len=2048" in text
        # the node's memory as the message prints it (2 decimals), against this machine's MemTotal
        said = re.search(rf"{host}: profile llama-3\.3-70b-vllm-tp2 \(TP=2, PP=1, --max-model-len 2048\) "
                         r"does not fit ([0-9.]+) GiB", text)
        assert said, text[-3000:]
        assert abs(float(said.group(1)) - mem_total_gib()) < 0.006, (said.group(0), mem_total_gib())
    assert "weights need 65.7 GiB per node" in text
    assert "Nothing was stopped or started. Fix: lower --max-model-len, add nodes" in text
    # run.yml never ran: no unit was probed, stopped or started
    for task in ("Would any rank of the engine", "Stop the API rank first", "Start the headless ranks"):
        assert task not in out


def test_sim_profile_fits_and_prints_its_numbers(work):
    rc, out = play(work, "preflight_only.yml", {"llmfleet_serve_profile": "sim-tiny-llama"})
    assert rc == 0, out[-4000:]
    for host in ("nodea", "nodeb"):
        line = memfit_line(out, host)
        assert "sim-tiny-llama TP=2 PP=1 max-model-len=512 x1" in line
        # the CPU build's fixed pool: VLLM_CPU_KVCACHE_SPACE=1 (GiB), not a utilisation share
        assert "KV pool 1.0 (needs 0.0" in line
        assert f"node {round(mem_total_gib(), 2)} GiB" in line
        assert "dims from profile model_facts" in line
        assert line.startswith(f"MEMFIT fit {host}")


def test_explicit_kv_cache_bytes_wins(work):
    extra = {"llmfleet_serve_profile": "sim-tiny-llama",
             "llmfleet_serve_profiles_extra": {"sim-tiny-llama": {"args": {"--kv-cache-memory-bytes": "64M"}}}}
    rc, out = play(work, "preflight_only.yml", extra)
    assert rc == 0, out[-4000:]
    line = memfit_line(out, "nodea")
    assert "KV pool 0.06 (needs 0.0" in line, line


def test_check_mode_reads_memory_and_refuses_too(work):
    """Check mode must not hide a plan that cannot fit (the memory read is read-only, it runs)."""
    extra = {"llmfleet_serve_profile": "sim-tiny-llama", "serve_memory_fit_node_memory_gib": 3.0}
    rc, out = play(work, "preflight_only.yml", extra, "--check")
    text = flat(out)
    assert rc == 2, out[-4000:]
    assert "MEMFIT refuse nodea: sim-tiny-llama" in text
    assert "under the 1.0 GiB floor" in text


def test_reads_config_json_from_the_node_copy(work):
    """A model directory on the node (where the models role put it): its config.json wins over model_facts."""
    model = work / "models" / "tiny-llama"
    model.mkdir(parents=True, exist_ok=True)
    config = ROOT / "tests" / "unit" / "fixtures" / "model_configs" / "tiny-llama.json"
    (model / "config.json").write_text(config.read_text())
    extra = {"llmfleet_serve_profile": "sim-tiny-llama",
             "llmfleet_serve_profiles_extra": {"sim-tiny-llama": {"model": str(model)}}}
    rc, out = play(work, "preflight_only.yml", extra)
    assert rc == 0, out[-4000:]
    line = memfit_line(out, "nodeb")
    assert f"dims from {model}/config.json" in line, line
    assert line.startswith("MEMFIT fit nodeb")


def test_ray_backend_renders_a_unit_on_the_head_only(work):
    """Backend ray across 2 nodes (PP=2, the lab profiles' shape): the head renders the engine
    command, the other rank renders none (its engine processes are Ray's) and does not fail."""
    extra = {"llmfleet_serve_profile": "sim-tiny-llama",
             "llmfleet_serve_profiles_extra": {"sim-tiny-llama": {
                 "backend": "ray", "tensor_parallel_size": 1, "pipeline_parallel_size": 2}}}
    (work / "render.yml").write_text(yaml.safe_dump([{
        "name": "Serve preflight, then what it rendered", "hosts": "ray_head:ray_workers", "gather_facts": False,
        "tasks": [
            {"name": "Preflight", "ansible.builtin.include_role": {
                "name": "llmfleet.cluster.serve", "tasks_from": "preflight.yml"}},
            {"name": "Show", "ansible.builtin.debug": {
                "msg": "RENDERED {{ inventory_hostname }} runs_unit={{ serve_runs_unit }} "
                       "argv_len={{ serve_argv | length }} unit_hosts={{ serve_unit_hosts | join(',') }}"}}]}]))
    rc, out = play(work, "render.yml", extra)
    text = flat(out)
    assert rc == 0, out[-4000:]
    assert "RENDERED nodea runs_unit=True" in text, text[-3000:]
    assert "RENDERED nodeb runs_unit=False argv_len=0 unit_hosts=nodea" in text
    argv_len = int(re.search(r"RENDERED nodea runs_unit=True argv_len=(\d+)", text).group(1))
    assert argv_len > 5
    assert "only node rank 0 starts the server" not in text


def test_hub_model_is_served_from_the_node_copy(work):
    """A hub id renders as the models role's node path (HF_HUB_OFFLINE=1 would miss the id), and the
    API keeps the id as its served name; serve_local_model=false renders the profile as written."""
    extra = {"llmfleet_serve_profile": "llama-3.3-70b-vllm-tp2", "serve_memory_fit": False,
             "llmfleet_serve_profiles_extra": {"llama-3.3-70b-vllm-tp2": {"backend": "mp"}}}
    (work / "argv.yml").write_text(yaml.safe_dump([{
        "name": "Serve preflight, then the rendered argv", "hosts": "ray_head", "gather_facts": False,
        "tasks": [
            {"name": "Preflight", "ansible.builtin.include_role": {
                "name": "llmfleet.cluster.serve", "tasks_from": "preflight.yml"}},
            {"name": "Show", "ansible.builtin.debug": {"msg": "ARGV {{ serve_argv | join(' ') }} ARGV"}}]}]))
    rc, out = play(work, "argv.yml", extra)
    assert rc == 0, out[-4000:]
    argv = re.search(r"ARGV (.*?) ARGV", flat(out)).group(1).split()
    hub_id = argv[argv.index("--served-model-name") + 1]
    assert "/" in hub_id and not hub_id.startswith("/"), argv
    assert argv[2] == f"/opt/llmfleet/models/{hub_id}", argv
    rc, out = play(work, "argv.yml", {**extra, "serve_local_model": False})
    assert rc == 0, out[-4000:]
    assert re.search(r"ARGV (.*?) ARGV", flat(out)).group(1).split()[2] == hub_id
