"""The controller gate over EVERY inventory shipped under inventories/ (issue 18).

For each directory inventories/<name>/ (and each overlay combination in OVERLAYS) this runs

    ansible-playbook playbooks/preflight.yml -i inventories/<name> --tags preflight_controller

with the hosts unreachable by construction: ssh/scp/sftp are the recorder of
test_controller_preflight.py (logs and refuses every call), ``ansible_ssh_common_args`` adds
``ProxyCommand=false`` and the connect timeout is 5 s. The run must pass, and nothing may have
tried to contact a host. A failure names the inventory and repeats its FAIL lines.

A copy of inventories/lab broken on purpose (an unknown profile name) must fail the same way,
naming the copy and the profile: that proves the check can fail.
"""

from __future__ import annotations

import concurrent.futures
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_controller_preflight import RECORDER, collection_link, recorder_env  # same dir: pytest puts it on sys.path

ROOT = Path(__file__).resolve().parents[3]
INVENTORIES = ROOT / "inventories"
PLAYBOOK = ROOT / "playbooks" / "preflight.yml"
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
# Overlay inventories: they complete a base inventory and are checked only on top of it.
OVERLAYS = {"lab-twin": ["lab", "lab-twin"]}
STANDALONE = sorted(p.name for p in INVENTORIES.iterdir()
                    if (p / "hosts.yml").is_file() and p.name not in OVERLAYS)
COMBOS = {name: [name] for name in STANDALONE} | {"+".join(v): v for v in OVERLAYS.values()}


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory):
    collection_link()
    path = tmp_path_factory.mktemp("recorder")
    for name in ("ssh", "scp", "sftp"):
        (path / name).write_text(RECORDER)
        (path / name).chmod((path / name).stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def run_gate(inventories: list[Path], bin_dir: Path, work: Path) -> tuple[int, str, str, float]:
    """(rc, output, contact log, seconds) of the controller gate on these inventories."""
    log = work / "contacts.log"
    env = recorder_env(bin_dir, work, log)
    cmd = [str(ANSIBLE_PLAYBOOK), str(PLAYBOOK), "--tags", "preflight_controller",
           "-e", "ansible_ssh_common_args='-o ProxyCommand=false'"]
    for inv in inventories:
        cmd += ["-i", str(inv)]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    return (proc.returncode, proc.stdout + proc.stderr, log.read_text() if log.exists() else "",
            time.monotonic() - start)


def gate_problems(label: str, rc: int, out: str, contacts: str) -> list[str]:
    """One line per problem, each starting with the inventory's label (empty when it passes)."""
    lines = [f"inventory {label}: {line.strip()}" for line in out.splitlines() if line.strip().startswith("FAIL ")]
    if rc != 0 and not lines:
        lines = [f"inventory {label}: ansible-playbook rc={rc}: {out[-1500:]}"]
    if contacts:
        lines.append(f"inventory {label}: a host was contacted: {contacts.strip()}")
    return lines


@pytest.fixture(scope="module")
def gate_runs(bin_dir, tmp_path_factory):
    """Every combination once, a few at a time (each run is mostly ansible-playbook start-up)."""
    def one(label):
        work = tmp_path_factory.mktemp(label.replace("+", "_"))
        return run_gate([INVENTORIES / n for n in COMBOS[label]], bin_dir, work)
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(sorted(COMBOS), pool.map(one, sorted(COMBOS))))


@pytest.mark.parametrize("label", sorted(COMBOS))
def test_every_shipped_inventory_passes_the_gate(label, gate_runs):
    rc, out, contacts, seconds = gate_runs[label]
    problems = gate_problems(label, rc, out, contacts)
    assert problems == [], "\n".join(problems)
    assert rc == 0 and "ok   engine and serve profile" in out, out[-3000:]
    assert seconds < 90, f"{label}: the gate took {seconds:.1f}s"


def test_every_inventory_dir_is_checked():
    dirs = {p.name for p in INVENTORIES.iterdir() if p.is_dir()}
    covered = {n for names in COMBOS.values() for n in names}
    assert dirs == covered, f"inventories without a gate run: {sorted(dirs - covered)}"


def test_a_broken_inventory_fails_naming_it(bin_dir, tmp_path):
    """A temp copy of inventories/lab with a wrong profile name must fail, naming the copy and the profile."""
    broken = tmp_path / "lab-broken"
    shutil.copytree(INVENTORIES / "lab", broken)
    all_yml = broken / "group_vars" / "all.yml"
    text = all_yml.read_text()
    assert "llmfleet_serve_profile: nemotron-super-nvfp4-vllm-pp4" in text
    all_yml.write_text(text.replace("nemotron-super-nvfp4-vllm-pp4", "nemotron-super-nvfp4-pp4"))
    rc, out, contacts, _seconds = run_gate([broken], bin_dir, tmp_path)
    problems = gate_problems(broken.name, rc, out, contacts)
    assert rc == 2, out[-3000:]
    assert contacts == ""
    assert any(line.startswith("inventory lab-broken: FAIL spark1, spark2, thor1, thor2: llmfleet_serve_profile "
                               "'nemotron-super-nvfp4-pp4' does not exist") for line in problems), problems


def test_several_mistakes_stop_together_each_named(bin_dir, tmp_path):
    """A copy of inventories/lab with five of the mistakes the gate's mutation test makes one at a time
    (test_gate_mutations.py), all at once, through ansible-playbook: one run lists every one of them
    (host, variable, value, cause) before it stops, and contacts no host."""
    broken = tmp_path / "lab-mistakes"
    shutil.copytree(INVENTORIES / "lab", broken)
    all_yml = broken / "group_vars" / "all.yml"
    text = all_yml.read_text()
    assert "llmfleet_serve_profile: nemotron-super-nvfp4-vllm-pp4\n" in text
    all_yml.write_text(text.replace("llmfleet_serve_profile: nemotron-super-nvfp4-vllm-pp4\n", "") + """
llmfleet_serve_profile: site-pp4
llmfleet_serve_profiles_extra:
  site-pp4:
    extends: nemotron-super-nvfp4-vllm-pp4
    args:
      --gpu-memory-utilisation: 0.8
    model_facts:
      params: 2000000000000
      weight_bits: 16
serve_allow: [10.0.0.0/33]
""")
    (broken / "host_vars").mkdir()
    (broken / "host_vars" / "thor2.yml").write_text("models_dir: /srv/models\n")
    hosts = broken / "hosts.yml"
    text = hosts.read_text()
    assert "ansible_host: 10.0.0.22\n          llmfleet_fabric_ip: 10.0.0.22" in text
    hosts.write_text(text.replace("ansible_host: 10.0.0.22\n          llmfleet_fabric_ip: 10.0.0.22",
                                  "ansible_host: 10.0.0.22\n          llmfleet_fabric_ip: 10.0.0.26"))
    rc, out, contacts, _seconds = run_gate([broken], bin_dir, tmp_path)
    problems = gate_problems(broken.name, rc, out, contacts)
    assert rc == 2 and contacts == "", out[-3000:]
    for words in ("unknown flag --gpu-memory-utilisation",  # the inventory profile's misspelled flag
                  "profile 'site-pp4' does not fit",  # its model on the nodes' memory
                  "serve_allow holds '10.0.0.0/33', which does not parse",
                  "thor2: models_dir differs across",
                  "FAIL spark2: llmfleet_fabric_ip '10.0.0.26' is thor2's management address (ansible_host)"):
        assert any(words in line for line in problems), f"{words!r} not in:\n" + "\n".join(problems)
    assert not any("subnets" in line for line in problems), problems
