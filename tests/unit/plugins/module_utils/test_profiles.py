"""Profiles: merge, validation, version gates and command rendering, as data tables."""
import os

import pytest
import yaml

from ansible_collections.llmfleet.cluster.plugins.module_utils import profiles as P

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PROFILES_DIR = os.path.join(ROOT, "profiles")


def shipped():
    out = {}
    for fname in sorted(os.listdir(PROFILES_DIR)):
        if fname.endswith(".yml"):
            with open(os.path.join(PROFILES_DIR, fname), encoding="utf-8") as handle:
                out[fname[:-4]] = yaml.safe_load(handle)
    return out


CATALOGUE = P.merge_catalogues(shipped())


def resolved(name, extras=None):
    return P.resolve_profile(P.merge_catalogues(shipped(), extras), name)


# ------------------------------------------------------------------------------------------------
# versions
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("0.11.0", (0, 11, 0)),
    ("0.11.0+582e4e37.nv25.11", (0, 11, 0)),      # NGC build: local suffix ignored
    ("v0.20.0", (0, 20, 0)),
    ("0.12.0rc1", (0, 12, 0, -1)),
    ("0.10.1.1", (0, 10, 1, 1)),
    ("0.5.10.post1", (0, 5, 10)),
    ("garbage", None),
    (None, None),
])
def test_parse_version(text, expected):
    assert P.parse_version(text) == expected


@pytest.mark.parametrize("version, lo, hi, inside", [
    ("0.17.1", None, "0.17", True),        # max inclusive at its precision
    ("0.17.9", None, "0.17", True),
    ("0.18.0", None, "0.17", False),
    ("0.18.0rc1", None, "0.17", False),
    ("0.12.0rc1", "0.12", None, True),     # a release candidate of 0.12 has 0.12's flags
    ("0.11.2", "0.12", None, False),
    ("0.10.1.1", "0.10.1", None, True),
    ("0.5.9", "0.5.10", None, False),      # numeric, not lexical
    ("0.5.23", "0.5.10", None, True),
    ("0.15.1", "0.13", "0.20", True),
    ("not-a-version", "0.13", "0.20", True),  # unknown version: nothing is gated
])
def test_version_in_range(version, lo, hi, inside):
    assert P.version_in_range(version, lo, hi) is inside


# ------------------------------------------------------------------------------------------------
# shipped profiles
# ------------------------------------------------------------------------------------------------
SERVABLE = sorted(n for n, p in CATALOGUE.items() if not p.get("abstract"))


def test_shipped_catalogue_is_the_issue_list():
    assert SERVABLE == [
        "llama-3.3-70b-vllm-tp2",
        "nemotron-super-nvfp4-sglang-pp2",
        "nemotron-super-nvfp4-sglang-pp4",
        "nemotron-super-nvfp4-vllm-pp2",
        "nemotron-super-nvfp4-vllm-pp4",
        "nemotron-super-nvfp4-vllm-tp2-1m",
        "qwen3.5-122b-fp8-sglang-pp4",
        "qwen3.5-122b-fp8-vllm-pp4",
        "qwen3.5-122b-fp8-vllm-tp2",
        "qwen3.5-35b-a3b-vllm",
        "sim-smollm2",
        "sim-tiny-llama",
        "sim-tiny-llama-ray-pp2",
        "sim-tiny-llama-ray-tp2",
        "sim-tiny-llama-sglang",
    ]


@pytest.mark.parametrize("name", SERVABLE)
def test_shipped_profile_resolves_without_host_and_with_engine_gates(name):
    prof = resolved(name)
    assert prof["name"] == name
    assert "--host" not in prof["args"] and "--port" not in prof["args"]
    base = "--swap-space" if prof["engine"] == "vllm" else "--use-ray"
    assert base in prof["gates"], "engine base gates are inherited"
    for key in ("params", "layers", "attention_layers", "kv_heads", "head_dim", "weight_bits"):
        assert key in prof["model_facts"], key


@pytest.mark.parametrize("name, field, expected", [
    ("nemotron-super-nvfp4-vllm-pp4", "pipeline_parallel_size", 4),
    ("nemotron-super-nvfp4-vllm-pp2", "pipeline_parallel_size", 2),          # via extends
    ("nemotron-super-nvfp4-vllm-pp2", "tensor_parallel_size", 1),
    ("nemotron-super-nvfp4-sglang-pp2", "backend", "ray"),
    ("sim-smollm2", "smoke", {"prompt": "What is the capital of France? Answer in one word.", "expect": "Paris"}),
    ("nemotron-super-nvfp4-vllm-tp2-1m", "required_env", [
        "VLLM_NVFP4_GEMM_BACKEND", "VLLM_FLASHINFER_ALLREDUCE_BACKEND",
        "VLLM_USE_FLASHINFER_MOE_FP4", "VLLM_ALLOW_LONG_MAX_MODEL_LEN"]),
    ("nemotron-super-nvfp4-vllm-tp2-1m", "env", {
        "VLLM_NVFP4_GEMM_BACKEND": "marlin", "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
        "VLLM_USE_FLASHINFER_MOE_FP4": "0", "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}),
    ("sim-tiny-llama", "backend", "mp"),
    ("sim-tiny-llama", "device", "cpu"),
    ("sim-tiny-llama", "served_model_name", "tiny-llama"),
    ("sim-tiny-llama", "model", "/opt/llmfleet/models/tiny-llama"),
    ("llama-3.3-70b-vllm-tp2", "served_model_name", None),
])
def test_shipped_profile_fields(name, field, expected):
    assert resolved(name)[field] == expected


@pytest.mark.parametrize("name, flag, value", [
    ("nemotron-super-nvfp4-vllm-pp4", "--attention-backend", "TRITON_ATTN"),
    ("nemotron-super-nvfp4-vllm-pp4", "--kv-cache-dtype", "fp8"),
    ("nemotron-super-nvfp4-vllm-pp4", "--reasoning-parser", "super_v3"),
    ("nemotron-super-nvfp4-vllm-pp4", "--tool-call-parser", "qwen3_coder"),
    ("nemotron-super-nvfp4-vllm-tp2-1m", "--max-model-len", 1048576),
    ("qwen3.5-122b-fp8-vllm-tp2", "--enable-prefix-caching", True),
    ("qwen3.5-122b-fp8-vllm-tp2", "--reasoning-parser", "qwen3"),
    ("qwen3.5-122b-fp8-vllm-tp2", "--gpu-memory-utilization", 0.80),
    ("sim-tiny-llama", "--dtype", "float32"),
    ("sim-tiny-llama", "--enforce-eager", True),
    ("nemotron-super-nvfp4-sglang-pp4", "--kv-cache-dtype", "fp8_e4m3"),
])
def test_shipped_profile_args(name, flag, value):
    assert resolved(name)["args"][flag] == value


# ------------------------------------------------------------------------------------------------
# merging
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("extras, name, check", [
    # same name as a shipped profile: merged over it, null removes an arg
    ({"nemotron-super-nvfp4-vllm-pp4": {"args": {"--gpu-memory-utilization": 0.8, "--enforce-eager": None}}},
     "nemotron-super-nvfp4-vllm-pp4",
     lambda p: p["args"]["--gpu-memory-utilization"] == 0.8 and "--enforce-eager" not in p["args"]
     and p["args"]["--kv-cache-dtype"] == "fp8"),
    # the change reaches a profile that extends it
    ({"nemotron-super-nvfp4-vllm-pp4": {"args": {"--max-num-seqs": 64}}},
     "nemotron-super-nvfp4-vllm-pp2",
     lambda p: p["args"]["--max-num-seqs"] == 64 and p["pipeline_parallel_size"] == 2),
    # a new profile based on a shipped one
    ({"qwen-tp2-32k": {"extends": "qwen3.5-122b-fp8-vllm-tp2", "args": {"--max-model-len": 32768}}},
     "qwen-tp2-32k",
     lambda p: p["args"]["--max-model-len"] == 32768 and p["tensor_parallel_size"] == 2
     and p["args"]["--reasoning-parser"] == "qwen3" and "--swap-space" in p["gates"]),
    # a gate overridden per profile
    ({"site": {"engine": "vllm", "model": "m", "gates": {"--swap-space": {"max_version": "0.19"}}}},
     "site", lambda p: p["gates"]["--swap-space"]["max_version"] == "0.19"),
    # lists are replaced, not merged
    ({"nemotron-super-nvfp4-vllm-tp2-1m": {"required_env": ["VLLM_NVFP4_GEMM_BACKEND"]}},
     "nemotron-super-nvfp4-vllm-tp2-1m", lambda p: p["required_env"] == ["VLLM_NVFP4_GEMM_BACKEND"]),
])
def test_extras_merge(extras, name, check):
    assert check(resolved(name, extras))


@pytest.mark.parametrize("extras, name, message", [
    ({}, "no-such-profile", "profile 'no-such-profile': no such profile (known: llama-3.3-70b-vllm-tp2"),
    ({}, "_vllm", "profile '_vllm': is abstract"),
    ({"a": {"extends": "b", "engine": "vllm", "model": "m"}, "b": {"extends": "a"}}, "a",
     "field 'extends': cycle a -> b -> a"),
    ({"a": {"extends": "nope", "engine": "vllm", "model": "m"}}, "a", "profile 'a': field 'extends': no such profile 'nope'"),
    ({"a": {"name": "b", "engine": "vllm", "model": "m"}}, "a", "field 'name': 'b' does not match its key 'a'"),
])
def test_resolve_errors(extras, name, message):
    with pytest.raises(P.ProfileError) as err:
        resolved(name, extras)
    assert message in str(err.value)


# ------------------------------------------------------------------------------------------------
# validation: every error names profile and field
# ------------------------------------------------------------------------------------------------
GOOD = {"name": "t", "engine": "vllm", "model": "org/model", "backend": "ray",
        "tensor_parallel_size": 2, "pipeline_parallel_size": None}


@pytest.mark.parametrize("change, message", [
    ({"engine": "tgi"}, "profile 't': field 'engine': 'tgi' is not one of vllm, sglang"),
    ({"backend": "native"}, "field 'backend': 'native' is not one of ray, mp for vllm"),
    ({"engine": "sglang", "backend": "mp"}, "field 'backend': 'mp' is not one of ray, native for sglang"),
    ({"model": ""}, "field 'model': required"),
    ({"tensor_parallel_size": "two"}, "field 'tensor_parallel_size': expected a positive integer or null"),
    ({"pipeline_parallel_size": 0}, "field 'pipeline_parallel_size': expected a positive integer"),
    ({"device": "tpu"}, "field 'device': 'tpu' is not one of gpu, cpu"),
    ({"args": {"--host": "0.0.0.0"}}, "field 'args.--host': set by llmfleet"),
    ({"args": {"--port": 5000}}, "field 'args.--port': set by llmfleet"),
    ({"args": {"--tensor-parallel-size": 2}}, "field 'args.--tensor-parallel-size': set by llmfleet"),
    ({"args": {"--api-key": "sk-123"}}, "field 'args.--api-key': set by llmfleet"),
    ({"engine": "sglang", "backend": "ray", "args": {"--pp": 4}}, "field 'args.--pp': set by llmfleet"),
    ({"args": {"max-model-len": 1}}, "field 'args.max-model-len': key must be a flag"),
    ({"env": {"HF_TOKEN": "hf_x"}}, "field 'env.HF_TOKEN': looks like a secret"),
    ({"env": {"VLLM_API_KEY": "x"}}, "field 'env.VLLM_API_KEY': looks like a secret"),
    ({"env": {"1BAD": "x"}}, "field 'env.1BAD': not a valid environment variable name"),
    ({"required_env": ["VLLM_X"]}, "field 'required_env': 'VLLM_X' has no value in field 'env'"),
    ({"files": [{"name": "p", "url": "ftp://x/p.py", "dest": "p.py"}]}, "field 'files[0]'.url: expected an http(s) URL"),
    ({"files": [{"name": "p", "url": "https://x/p.py"}]}, "field 'files[0]'.dest: required"),
    ({"gates": {"--x": {"on_fail": "ignore"}}}, "field 'gates.--x'.on_fail: 'ignore' is not one of error, drop, fallback"),
    ({"gates": {"--x": {"on_fail": "fallback"}}}, "field 'gates.--x': on_fail fallback needs a 'fallback' value"),
    ({"gates": {"--x": {"min_version": "soon"}}}, "field 'gates.--x'.min_version: 'soon' is not a version"),
    ({"gates": {"--x": {"values": [{"allowed": "auto"}]}}}, "field 'gates.--x'.values[0].allowed: expected a list"),
    ({"model_facts": {"params": "lots"}}, "field 'model_facts.params': expected a number"),
    ({"model_facts": {"parameters": 1}}, "field 'model_facts.parameters': unknown"),
    ({"host": "0.0.0.0"}, "unknown field 'host'"),
    ({"smoke": "Paris"}, "field 'smoke': expected a mapping"),
    ({"smoke": {"prompt": "Capital of France?", "answer": "Paris"}}, "field 'smoke': unknown key 'answer'"),
    ({"smoke": {"expect": "Paris"}}, "field 'smoke.expect': needs field 'smoke.prompt'"),
    ({"smoke": {"prompt": "", "expect": "Paris"}}, "field 'smoke.prompt': expected a non-empty string"),
])
def test_validation_errors(change, message):
    with pytest.raises(P.ProfileError) as err:
        P.validate_profile(dict(GOOD, **change))
    assert message in str(err.value)
    assert str(err.value).startswith("profile 't': ")


def test_validation_reports_every_problem_at_once():
    with pytest.raises(P.ProfileError) as err:
        P.validate_profile(dict(GOOD, engine="tgi", tensor_parallel_size=-1, env={"MY_TOKEN": "x"}))
    assert len(err.value.problems) == 3


# ------------------------------------------------------------------------------------------------
# gates
# ------------------------------------------------------------------------------------------------
VLLM_GATES = CATALOGUE["_vllm"]["gates"]


# each gated (flag, value) once, with the gate's verdict per engine version (True: the gate refuses it)
VLLM_GATE_VERDICTS = [
    ("--swap-space", 0, {"0.17.1": False, "0.18.0": True, None: False}),     # None: no version, no gating
    ("--attention-backend", "TRITON_ATTN", {"0.12.0": True, "0.13.0": False}),
    ("--moe-backend", "marlin", {"0.16.0": True, "0.17.0": False}),
    ("--reasoning-parser", "super_v3", {"0.11.0": True, "0.12.0": False}),
    ("--reasoning-parser", "qwen3", {"0.11.0": False}),
    ("--mamba-ssm-cache-dtype", "float16", {"0.11.0": True, "0.13.0": False}),
    ("--mamba-ssm-cache-dtype", "bfloat16", {"0.20.0": True, "0.22.1": False}),
    ("--mamba-ssm-cache-dtype", "auto", {"0.11.0": False}),
]


@pytest.mark.parametrize("flag, value, version, fails", [
    (flag, value, version, fails) for flag, value, verdicts in VLLM_GATE_VERDICTS for version, fails in verdicts.items()
])
def test_vllm_gates(flag, value, version, fails):
    problem = P.check_gate(flag, value, VLLM_GATES[flag], "vllm", version)
    assert (problem is not None) is fails
    if fails:
        assert flag in problem and version in problem


@pytest.mark.parametrize("version, args_present, dropped, replaced", [
    # vLLM 0.11 (NGC 25.11 era): the 004 launcher's newer flags fall away, the plugin file too
    ("0.11.0", {"--async-scheduling", "--mamba-ssm-cache-dtype", "--max-model-len"},
     {"--moe-backend", "--max-cudagraph-capture-size", "--reasoning-parser-plugin", "--reasoning-parser"}, set()),
    ("0.20.0", {"--moe-backend", "--max-cudagraph-capture-size", "--reasoning-parser-plugin", "--reasoning-parser"},
     set(), set()),
])
def test_resolve_args_gates_the_1m_profile(version, args_present, dropped, replaced):
    prof = resolved("nemotron-super-nvfp4-vllm-tp2-1m")
    out = P.resolve_args(prof, version)
    assert args_present <= set(out["args"])
    assert not dropped & set(out["args"])
    assert {d.split()[0] for d in out["dropped"]} == dropped
    assert out["errors"] == [] and out["replaced"] == []
    assert bool(out["files"]) is ("--reasoning-parser-plugin" in out["args"])


def test_fallback_gate_replaces_value():
    prof = resolved("nemotron-super-nvfp4-vllm-tp2-1m")
    out = P.resolve_args(prof, "0.11.0", {"--mamba-ssm-cache-dtype": "float16"})
    assert out["args"]["--mamba-ssm-cache-dtype"] == "auto"
    assert "using --mamba-ssm-cache-dtype auto" in out["replaced"][0]


# ------------------------------------------------------------------------------------------------
# rendering
# ------------------------------------------------------------------------------------------------
NEMOTRON_PP4_TAIL = [
    "--dtype", "auto", "--kv-cache-dtype", "fp8", "--swap-space", "0", "--trust-remote-code",
    "--attention-backend", "TRITON_ATTN", "--gpu-memory-utilization", "0.85",
    "--enable-chunked-prefill", "--max-num-seqs", "512", "--enforce-eager",
    "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder", "--reasoning-parser", "super_v3",
    "--reasoning-parser-plugin", "/opt/llmfleet/files/super_v3_reasoning_parser.py",
]
NEMOTRON_HEAD = [
    "vllm", "serve", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
    "--served-model-name", "nvidia/nemotron-3-super",
    "--tensor-parallel-size", "1", "--pipeline-parallel-size", "4", "--distributed-executor-backend", "ray",
]

RENDER_CASES = [
    # the notes' 000 command, host/port from the serve role (the notes' --host 0.0.0.0 is not kept)
    ("nemotron-super-nvfp4-vllm-pp4", dict(engine_version="0.17.1", host="10.0.0.25", port=5000),
     NEMOTRON_HEAD + ["--host", "10.0.0.25", "--port", "5000"] + NEMOTRON_PP4_TAIL),
    # vLLM 0.20 has no --swap-space: dropped by the gate
    ("nemotron-super-nvfp4-vllm-pp4", dict(engine_version="0.20.0"),
     NEMOTRON_HEAD + ["--host", "127.0.0.1", "--port", "8000"]
     + [t for t in NEMOTRON_PP4_TAIL if t not in ("--swap-space", "0")]),
    # the sim: vLLM native multi-node, rank 0 serves, rank 1 headless
    ("sim-tiny-llama", dict(engine_version="0.20.0", nnodes=2, node_rank=0, master_addr="10.89.1.11"),
     ["vllm", "serve", "/opt/llmfleet/models/tiny-llama", "--served-model-name", "tiny-llama",
      "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1", "--distributed-executor-backend", "mp",
      "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.89.1.11",
      "--host", "127.0.0.1", "--port", "8000",
      "--dtype", "float32", "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "4"]),
    ("sim-tiny-llama", dict(engine_version="0.20.0", nnodes=2, node_rank=1, master_addr="10.89.1.11", master_port=29511),
     ["vllm", "serve", "/opt/llmfleet/models/tiny-llama", "--served-model-name", "tiny-llama",
      "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1", "--distributed-executor-backend", "mp",
      "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.89.1.11", "--master-port", "29511", "--headless",
      "--dtype", "float32", "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "4"]),
    # the sim over Ray (SIM-ONLY engine patches): the head alone starts vLLM, Ray places the ranks;
    # no --nnodes/--master-addr; the Ray resource for the ranks travels in the env, not the argv
    ("sim-tiny-llama-ray-tp2", dict(engine_version="0.32.0", nnodes=2, node_rank=0, master_addr="10.231.1.11",
                                    host="10.231.1.11"),
     ["vllm", "serve", "/opt/llmfleet/models/tiny-llama", "--served-model-name", "tiny-llama",
      "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1", "--distributed-executor-backend", "ray",
      "--host", "10.231.1.11", "--port", "8000",
      "--dtype", "float32", "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "4",
      "--reasoning-parser", "deepseek_r1"]),
    ("sim-tiny-llama-ray-pp2", dict(engine_version="0.32.0", nnodes=2),
     ["vllm", "serve", "/opt/llmfleet/models/tiny-llama", "--served-model-name", "tiny-llama",
      "--tensor-parallel-size", "1", "--pipeline-parallel-size", "2", "--distributed-executor-backend", "ray",
      "--host", "127.0.0.1", "--port", "8000",
      "--dtype", "float32", "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "4"]),
    # SGLang with Ray: head only, --tp-size/--pp-size spelled out
    ("qwen3.5-122b-fp8-sglang-pp4", dict(engine_version="0.5.23", nnodes=4),
     ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.5-122B-A10B-FP8",
      "--served-model-name", "qwen3.5-122b", "--tp-size", "1", "--pp-size", "4", "--nnodes", "4", "--use-ray",
      "--host", "127.0.0.1", "--port", "8000", "--enable-metrics", "--sleep-on-idle", "--trust-remote-code", "--mem-fraction-static",
      "0.85", "--context-length", "32768", "--max-running-requests", "256", "--disable-cuda-graph"]),
    # SGLang native, rank 2 of 4: no HTTP flags, no key wrapper
    ("qwen3.5-122b-fp8-sglang-pp4", dict(engine_version="0.5.23", nnodes=4, node_rank=2, master_addr="10.0.0.25",
                                         overrides={"backend": "native"}, api_key_env="LLMFLEET_API_KEY"),
     ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.5-122B-A10B-FP8",
      "--served-model-name", "qwen3.5-122b", "--tp-size", "1", "--pp-size", "4", "--nnodes", "4",
      "--node-rank", "2", "--dist-init-addr", "10.0.0.25:20000", "--enable-metrics", "--sleep-on-idle", "--trust-remote-code",
      "--mem-fraction-static", "0.85", "--context-length", "32768", "--max-running-requests", "256",
      "--disable-cuda-graph"]),
    # SGLang with Ray on one node (the notes' one-GPU run): --use-ray without --nnodes
    ("qwen3.5-122b-fp8-sglang-pp4", dict(engine_version="0.5.23", overrides={"pipeline_parallel_size": 1}),
     ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.5-122B-A10B-FP8",
      "--served-model-name", "qwen3.5-122b", "--tp-size", "1", "--pp-size", "1", "--use-ray",
      "--host", "127.0.0.1", "--port", "8000", "--enable-metrics", "--sleep-on-idle", "--trust-remote-code", "--mem-fraction-static",
      "0.85", "--context-length", "32768", "--max-running-requests", "256", "--disable-cuda-graph"]),
    # SGLang API key: the launcher adds it in-process from LLMFLEET_API_KEY; no key flag in argv
    ("nemotron-super-nvfp4-sglang-pp2", dict(nnodes=2, api_key_env="LLMFLEET_API_KEY", executable="/opt/sglang/bin/python",
                                             launcher="/opt/llmfleet/lib/llmfleet_sglang_launch.py"),
     ["/opt/sglang/bin/python", "/opt/llmfleet/lib/llmfleet_sglang_launch.py",
      "--model-path", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "--served-model-name", "nvidia/nemotron-3-super",
      "--tp-size", "1", "--pp-size", "2", "--nnodes", "2", "--use-ray", "--host", "127.0.0.1", "--port", "8000",
      "--enable-metrics", "--sleep-on-idle", "--dtype", "auto", "--kv-cache-dtype", "fp8_e4m3", "--trust-remote-code", "--mem-fraction-static", "0.85",
      "--chunked-prefill-size", "8192", "--max-running-requests", "512", "--disable-cuda-graph"]),
    # overrides: a flag changed, a flag removed, a structural key from a plan, a list and a JSON value
    ("qwen3.5-122b-fp8-vllm-tp2", dict(
        overrides={"--max-model-len": 8192, "--enforce-eager": None, "--enable-prefix-caching": False,
                   "tensor_parallel_size": 2, "--middleware": ["a.b", "c.d"], "--compilation-config": {"level": 3}},
        api_key_env="VLLM_API_KEY", files_dir="/srv/f"),
     ["vllm", "serve", "Qwen/Qwen3.5-122B-A10B-FP8", "--served-model-name", "qwen3.5-122b",
      "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1", "--distributed-executor-backend", "ray",
      "--host", "127.0.0.1", "--port", "8000", "--trust-remote-code", "--gpu-memory-utilization", "0.8",
      "--max-model-len", "8192", "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder",
      "--max-num-batched-tokens", "4096", "--middleware", "a.b", "c.d", "--compilation-config", '{"level":3}']),
    # an open PP filled from a plan
    ("llama-3.3-70b-vllm-tp2", dict(overrides={"pipeline_parallel_size": 1}),
     ["vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct", "--tensor-parallel-size", "2",
      "--pipeline-parallel-size", "1", "--distributed-executor-backend", "ray", "--host", "127.0.0.1",
      "--port", "8000", "--max-model-len", "2048", "--gpu-memory-utilization", "0.7"]),
]


@pytest.mark.parametrize("name, kwargs, argv", RENDER_CASES)
def test_render_command(name, kwargs, argv):
    assert P.render_command(resolved(name), **kwargs) == argv


@pytest.mark.parametrize("name, kwargs, message", [
    ("nemotron-super-nvfp4-vllm-pp4", dict(engine_version="0.11.0"),
     "--attention-backend is not available in vllm 0.11.0: needs >= 0.13"),
    ("sim-tiny-llama", dict(engine_version="0.11.0", nnodes=2, master_addr="10.89.1.11"),
     "--nnodes is not available in vllm 0.11.0: needs >= 0.12"),
    ("qwen3.5-122b-fp8-sglang-pp4", dict(engine_version="0.5.9", nnodes=4),
     "--use-ray is not available in sglang 0.5.9: needs >= 0.5.10"),
    ("qwen3.5-122b-fp8-sglang-pp4", dict(overrides={"--kv-cache-dtype": "fp8"}, engine_version="0.5.23"),
     "--kv-cache-dtype fp8 is not accepted by sglang 0.5.23"),
    ("nemotron-super-nvfp4-vllm-pp4", dict(nnodes=4, node_rank=1),
     "backend ray: only node rank 0 starts the server"),
    ("sim-tiny-llama", dict(nnodes=2), "backend mp across 2 nodes needs master_addr"),
    ("sim-tiny-llama", dict(nnodes=2, node_rank=2, master_addr="x"), "node_rank: 2 is outside 0..1"),
    ("sim-tiny-llama", dict(headless=True), "node rank 0 serves the API and cannot be headless"),
    ("qwen3.5-122b-fp8-vllm-tp2", dict(api_key_env="MY_KEY"), "vLLM reads its key only from VLLM_API_KEY"),
    ("qwen3.5-122b-fp8-sglang-pp4", dict(api_key_env="SGLANG_API_KEY", launcher="/l/llmfleet_sglang_launch.py"),
     "the SGLang launcher reads the key only from LLMFLEET_API_KEY, not SGLANG_API_KEY"),
    ("qwen3.5-122b-fp8-sglang-pp4", dict(api_key_env="LLMFLEET_API_KEY"),
     "SGLang takes its key only on its command line; pass launcher"),
    ("qwen3.5-122b-fp8-vllm-tp2", dict(api_key_env="X; rm -rf /"), "api_key_env: 'X; rm -rf /' is not a variable name"),
    ("qwen3.5-122b-fp8-vllm-tp2", dict(overrides={"pipeline_parallel_size": None, "tensor_parallel_size": 2}), None),
])
def test_render_errors(name, kwargs, message):
    if message is None:      # a None override leaves the profile's value alone
        assert P.render_command(resolved(name), **kwargs)
        return
    with pytest.raises(P.ProfileError) as err:
        P.render_command(resolved(name), **kwargs)
    assert message in str(err.value)
    assert f"profile '{name}'" in str(err.value)


def test_render_open_parallelism_asks_for_a_plan():
    prof = P.validate_profile(dict(GOOD))
    with pytest.raises(P.ProfileError) as err:
        P.render_command(prof)
    assert "field 'pipeline_parallel_size' is open: run the planner (serve_plan)" in str(err.value)


@pytest.mark.parametrize("name", SERVABLE)
def test_no_secret_and_no_wildcard_bind_in_any_command(name):
    prof = resolved(name)
    nnodes = 2 if prof["backend"] in ("mp", "native") and prof["tensor_parallel_size"] > 1 else 1
    key_env = "VLLM_API_KEY" if prof["engine"] == "vllm" else "LLMFLEET_API_KEY"
    launcher = "/opt/llmfleet/lib/llmfleet_sglang_launch.py" if prof["engine"] == "sglang" else None
    argv = P.render_command(prof, engine_version=None, nnodes=nnodes, master_addr="10.0.0.25", api_key_env=key_env,
                            launcher=launcher)
    assert "0.0.0.0" not in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert not [a for a in argv if a.startswith("--api-key") or a.startswith("--admin-api-key")]
    if prof["engine"] == "sglang":
        assert argv[1] == launcher


@pytest.mark.parametrize("name, expected", [
    ("qwen3.5-122b-fp8-vllm-tp2", {"max_model_len": 16384, "max_num_seqs": None, "gpu_memory_utilization": 0.80,
                                   "kv_cache_dtype": None, "mamba_ssm_cache_dtype": None,
                                   "kv_cache_memory_bytes": None}),
    ("qwen3.5-122b-fp8-sglang-pp4", {"max_model_len": 32768, "max_num_seqs": 256, "gpu_memory_utilization": 0.85,
                                     "kv_cache_dtype": None, "mamba_ssm_cache_dtype": None}),
])
def test_serving_params(name, expected):
    assert P.serving_params(resolved(name)) == expected


@pytest.mark.parametrize("argv, engine, prefix, args", [
    (["vllm", "serve", "m", "--a", "1"], "vllm", ["vllm", "serve", "m"], ["--a", "1"]),
    (["/v/bin/vllm", "serve", "--model", "m"], "vllm", ["/v/bin/vllm", "serve"], ["--model", "m"]),
    (["python3", "-m", "sglang.launch_server", "--model-path", "m"], "sglang",
     ["python3", "-m", "sglang.launch_server"], ["--model-path", "m"]),
    (["/v/bin/python", "/opt/llmfleet/lib/llmfleet_sglang_launch.py", "--tp-size", "1"],
     "sglang", ["/v/bin/python", "/opt/llmfleet/lib/llmfleet_sglang_launch.py"], ["--tp-size", "1"]),
])
def test_strip_launcher(argv, engine, prefix, args):
    assert P.strip_launcher(argv, engine) == (prefix, args)
