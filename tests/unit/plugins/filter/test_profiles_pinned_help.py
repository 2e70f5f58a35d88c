"""Every shipped profile, rendered for its engine, against the real `--help` of the PINNED engine version.

The pinned versions are read from the python_env variant files (roles/python_env/vars/variants/*.yml:
``<engine>==<version>`` in ``packages``, the local label such as ``+cpu`` dropped), so re-pinning a
variant makes this test demand the capture of the new version. The captures are
engine_help/<engine>-<version>.txt, each with a header saying how it was captured.
A profile rank whose flag the pinned build does not accept fails, naming profile, flag and version.
"""
import glob
import os
import re

import pytest
import yaml

from ansible_collections.llmfleet.cluster.plugins.filter import serving
from ansible_collections.llmfleet.cluster.plugins.module_utils import flagcheck
from ansible_collections.llmfleet.cluster.plugins.module_utils import profiles as _profiles

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
HELP_DIR = os.path.join(ROOT, "engine_help")
VARIANTS = os.path.join(ROOT, "roles", "python_env", "vars", "variants")
# Pinned versions without a real capture yet, each with the reason (shown as a skip, never silent).
UNCAPTURED: dict = {}  # e.g. {("sglang", "0.5.17"): "why it cannot be captured here"}


def pinned_versions():
    """{engine: sorted versions} that some variant installs."""
    out = {}
    for path in sorted(glob.glob(os.path.join(VARIANTS, "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            variant = (yaml.safe_load(handle) or {}).get("python_env_variant") or {}
        engine = variant.get("engine")
        for req in variant.get("packages") or []:
            match = re.match(rf"^{engine}==([0-9][^+\s]*)", str(req))
            if match:
                out.setdefault(engine, set()).add(match.group(1))
    return {engine: sorted(versions) for engine, versions in out.items()}


# Versions checked besides the variants' pins, with why: the sim's SGLang CPU pin (issue 20 adds its
# variant; once it pins 0.5.21 in a variant file this entry is redundant, not wrong).
ALSO_CHECKED = {"sglang": ["0.5.21"]}
PINNED = {e: sorted(set(v) | set(ALSO_CHECKED.get(e, []))) for e, v in pinned_versions().items()}
HOSTS = {
    # a serving group of the profile's size: GB10 on GPU profiles, sim nodes on CPU ones
    "gpu": lambda n: [{"name": f"spark{i}", "gpu_arch": "sm_121", "gpus_per_node": 1, "transport": "roce"}
                      for i in range(1, n + 1)],
    "cpu": lambda n: [{"name": f"sim{i}", "gpu_arch": "cpu"} for i in range(1, n + 1)],
}
SHIPPED = sorted(n for n in serving.load_shipped() if not n.startswith("_"))
CASES = [(name, version) for name in SHIPPED
         for version in PINNED.get(serving.serve_profile(name)["engine"], ["<none pinned>"])]


def test_the_variants_pin_vllm_0_31_0_and_0_32_0():
    """Guards the table above: if this moves, capture the new version (see the fixtures' headers).
    0.31.0 is the sim's second CPU release (cpu-vllm-0.31.0.yml), every other vLLM variant pins 0.32.0."""
    assert PINNED["vllm"] == ["0.31.0", "0.32.0"]


@pytest.mark.parametrize("name, version", CASES, ids=[f"{n}@{v}" for n, v in CASES])
def test_shipped_profile_passes_the_pinned_help(name, version):
    prof = serving.serve_profile(name)
    engine = prof["engine"]
    capture = os.path.join(HELP_DIR, f"{engine}-{version}.txt")
    if not os.path.isfile(capture):
        reason = UNCAPTURED.get((engine, version))
        if reason:
            pytest.skip(f"{engine} {version}: no real --help capture: {reason}")
        pytest.fail(f"profile {name}: {engine} {version} is pinned (python_env variants) but "
                    f"{os.path.relpath(capture, ROOT)} is missing: capture its --help")
    with open(capture, encoding="utf-8") as handle:
        index = flagcheck.parse_help(handle.read())
    size = prof["tensor_parallel_size"] * prof["pipeline_parallel_size"]
    plan = serving.serve_plan(prof, HOSTS[prof.get("device", "gpu")](size))
    # how the serve role renders them: vLLM reads VLLM_API_KEY, SGLang's launcher LLMFLEET_API_KEY
    key_env = _profiles.VLLM_API_KEY_ENV if engine == "vllm" else _profiles.SGLANG_API_KEY_ENV
    launcher = None if engine == "vllm" else "/opt/llmfleet/bin/" + os.path.basename(_profiles.SGLANG_LAUNCHER)
    ranks = plan["ranks"] if prof["backend"] in ("mp", "native") else plan["ranks"][:1]
    errors = []
    for rank in ranks:
        argv = serving.serve_command(prof, plan, rank["node_rank"], engine_version=version,
                                     master_addr="10.0.0.25", host="10.0.0.25", api_key_env=key_env,
                                     launcher=launcher)
        out = flagcheck.check_argv(argv, index, engine, version, prof)
        errors += [f"profile {name}, rank {rank['node_rank']}: {err}" for err in out["errors"]]
    assert errors == [], "\n".join(errors)


def test_a_flag_the_pinned_build_lacks_fails_naming_profile_flag_version():
    """The check can fail: --num-scheduler-steps (multi-step scheduling, gone with the V0 engine) on 0.32.0."""
    with open(os.path.join(HELP_DIR, f"vllm-{PINNED['vllm'][-1]}.txt"), encoding="utf-8") as handle:
        index = flagcheck.parse_help(handle.read())
    prof = serving.serve_profile("broken", {"broken": {"extends": "sim-tiny-llama", "args": {"--num-scheduler-steps": 8}}})
    plan = serving.serve_plan(prof, HOSTS["cpu"](2))
    argv = serving.serve_command(prof, plan, 0, engine_version=PINNED["vllm"][-1], master_addr="10.0.0.1")
    out = flagcheck.check_argv(argv, index, "vllm", PINNED["vllm"][-1], prof)
    assert any(err.startswith("vllm 0.32.0: unknown flag --num-scheduler-steps") for err in out["errors"]), out
