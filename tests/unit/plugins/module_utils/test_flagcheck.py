"""Flag check against real `--help` captures (engine_help/), as data tables.

The command lines in NOTES_* are the field notes' own, copied as written.
"""
import os
import shlex

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import flagcheck

HELP_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))), "engine_help")  # the captures the controller gate ships


def _load(name):
    with open(os.path.join(HELP_DIR, name + ".txt"), encoding="utf-8") as handle:
        return flagcheck.parse_help(handle.read())


HELP = {name: _load(name) for name in ("vllm-0.11.0", "vllm-0.17.1", "vllm-0.20.0", "vllm-0.33.0", "sglang-0.5.23")}


def argv(text):
    return shlex.split(text.replace("\\\n", " "))


# Notes 000, "Nemotron Super 120B NVFP4 (4 nodes)", written for vLLM 0.17.1.
NOTES_000_NEMOTRON = argv("""vllm serve nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4 \\
  --served-model-name nvidia/nemotron-3-super --dtype auto --kv-cache-dtype fp8 \\
  --tensor-parallel-size 1 --pipeline-parallel-size 4 --distributed-executor-backend ray \\
  --swap-space 0 --trust-remote-code --attention-backend TRITON_ATTN --gpu-memory-utilization 0.85 \\
  --enable-chunked-prefill --max-num-seqs 512 --host 0.0.0.0 --port 5000 --enforce-eager \\
  --enable-auto-tool-choice --tool-call-parser qwen3_coder \\
  --reasoning-parser-plugin "./super_v3_reasoning_parser.py" --reasoning-parser super_v3""")
# Notes 004, the 1M launcher (variables filled in), written for the 26.05 NGC build.
NOTES_004_NEMOTRON = argv("""vllm serve nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4 \\
  --tensor-parallel-size 2 --pipeline-parallel-size 1 --data-parallel-size 1 \\
  --quantization fp4 --moe-backend marlin --dtype auto --kv-cache-dtype fp8 --mamba-ssm-cache-dtype auto \\
  --max-model-len 1048576 --gpu-memory-utilization 0.75 --max-cudagraph-capture-size 128 \\
  --enable-chunked-prefill --async-scheduling --trust-remote-code \\
  --reasoning-parser-plugin /root/.cache/huggingface/super_v3_reasoning_parser.py --reasoning-parser super_v3 \\
  --enable-auto-tool-choice --tool-call-parser qwen3_coder""")
# Notes 001, SGLang "Nemotron Super 120B NVFP4 (4 nodes)".
NOTES_001_NEMOTRON = argv("""python -m sglang.launch_server \\
  --model-path nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4 --served-model-name nvidia/nemotron-3-super \\
  --dtype auto --kv-cache-dtype fp8 --tp 1 --pp 4 --nnodes 4 --use-ray --trust-remote-code \\
  --mem-fraction-static 0.85 --chunked-prefill-size 8192 --max-running-requests 512 \\
  --host 0.0.0.0 --port 5000 --disable-cuda-graph""")


# ------------------------------------------------------------------------------------------------
# parsing
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build, flag, takes_value, nargs, choices, open_choices", [
    ("vllm-0.11.0", "--swap-space", True, None, None, False),
    ("vllm-0.11.0", "--mamba-ssm-cache-dtype", True, None, ["auto", "float32"], False),
    ("vllm-0.20.0", "--mamba-ssm-cache-dtype", True, None, ["auto", "float16", "float32"], False),
    ("vllm-0.33.0", "--mamba-ssm-cache-dtype", True, None, ["auto", "bfloat16", "float16", "float32"], False),
    ("vllm-0.20.0", "--distributed-executor-backend", True, None, ["external_launcher", "mp", "ray", "uni"], False),
    ("vllm-0.20.0", "--enforce-eager", False, 0, None, False),          # --enforce-eager, --no-enforce-eager
    ("vllm-0.20.0", "--no-enforce-eager", False, 0, None, False),
    ("vllm-0.33.0", "--disable-prefix-caching", False, 0, None, False),  # --enable-x, --disable-x
    ("vllm-0.20.0", "--api-key", True, "+", None, False),              # API_KEY [API_KEY ...]
    ("vllm-0.20.0", "--hf-token", True, "?", None, False),             # [HF_TOKEN]
    ("vllm-0.20.0", "-tp", True, None, None, False),                   # short alias of --tensor-parallel-size
    ("vllm-0.20.0", "--reasoning-parser", True, None, None, False),    # free-form since 0.12
    ("vllm-0.33.0", "--headless", False, 0, None, False),
    ("sglang-0.5.23", "--tp-size", True, None, None, False),
    ("sglang-0.5.23", "--tensor-parallel-size", True, None, None, False),
    ("sglang-0.5.23", "--use-ray", False, 0, None, False),
    ("sglang-0.5.23", "--kv-cache-dtype", True, None,
     ["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"], False),
])
def test_parse_help(build, flag, takes_value, nargs, choices, open_choices):
    spec = HELP[build]["flags"][flag]
    assert (spec["takes_value"], spec["nargs"], spec["choices"], spec["open_choices"]) == (
        takes_value, nargs, choices, open_choices)


@pytest.mark.parametrize("build, flag, first_choices", [
    ("vllm-0.11.0", "--reasoning-parser", ["deepseek_r1", "glm45", "openai_gptoss"]),
    ("vllm-0.33.0", "--tool-call-parser", ["apertus", "beam", "cohere_command3"]),
])
def test_parse_help_choice_lists(build, flag, first_choices):
    assert HELP[build]["flags"][flag]["choices"][:3] == first_choices


@pytest.mark.parametrize("build, present, absent", [
    ("vllm-0.11.0", ["--swap-space", "--async-scheduling", "--mamba-ssm-cache-dtype"],
     ["--attention-backend", "--moe-backend", "--reasoning-parser-plugin", "--nnodes", "--max-cudagraph-capture-size"]),
    ("vllm-0.17.1", ["--swap-space", "--attention-backend", "--moe-backend", "--reasoning-parser-plugin", "--nnodes"], []),
    ("vllm-0.20.0", ["--attention-backend", "--moe-backend", "--reasoning-parser-plugin", "--nnodes",
                     "--node-rank", "--master-addr", "--master-port"], ["--swap-space"]),
    ("vllm-0.33.0", ["--async-scheduling", "--max-cudagraph-capture-size"], ["--swap-space"]),
    ("sglang-0.5.23", ["--use-ray", "--dist-init-addr", "--nnodes", "--node-rank", "--pp-size", "--api-key",
                       "--disable-cuda-graph", "--served-model-name"], ["--tp", "--pp"]),
])
def test_parse_help_flag_sets(build, present, absent):
    flags = HELP[build]["flags"]
    assert [f for f in present if f not in flags] == []
    assert [f for f in absent if f in flags] == []


def test_parse_help_marks_deprecated():
    assert HELP["sglang-0.5.23"]["flags"]["--disable-cuda-graph"]["deprecated"]
    assert not HELP["sglang-0.5.23"]["flags"]["--use-ray"]["deprecated"]


# ------------------------------------------------------------------------------------------------
# checking
# ------------------------------------------------------------------------------------------------
CHECK_CASES = [
    # (id, argv, build, version, errors (substrings, in order), warnings substrings)
    ("000 Nemotron on vLLM 0.17.1, as written: fine", NOTES_000_NEMOTRON, "vllm-0.17.1", "0.17.1", [], []),
    ("000 Nemotron on vLLM 0.20.0: --swap-space was removed", NOTES_000_NEMOTRON, "vllm-0.20.0", "0.20.0",
     ["vllm 0.20.0: unknown flag --swap-space"], []),
    ("000 Nemotron on vLLM 0.11.0", NOTES_000_NEMOTRON, "vllm-0.11.0", "0.11.0",
     ["vllm 0.11.0: unknown flag --attention-backend",
      "vllm 0.11.0: unknown flag --reasoning-parser-plugin",
      "vllm 0.11.0: --reasoning-parser super_v3 is not one of deepseek_r1, glm45"], []),
    ("004 launcher on vLLM 0.20.0: fine", NOTES_004_NEMOTRON, "vllm-0.20.0", "0.20.0", [], []),
    ("004 launcher on vLLM 0.11.0 (the 25.11 NGC era)", NOTES_004_NEMOTRON, "vllm-0.11.0", "0.11.0",
     ["vllm 0.11.0: unknown flag --moe-backend", "vllm 0.11.0: unknown flag --max-cudagraph-capture-size",
      "vllm 0.11.0: unknown flag --reasoning-parser-plugin", "vllm 0.11.0: --reasoning-parser super_v3 is not one of"], []),
    ("004's --mamba-ssm-cache-dtype float16 on 0.11.0",
     ["vllm", "serve", "m", "--mamba-ssm-cache-dtype", "float16"], "vllm-0.11.0", "0.11.0",
     ["--mamba-ssm-cache-dtype float16 is not one of auto, float32"], []),
    ("001 SGLang Nemotron on 0.5.23, as written", NOTES_001_NEMOTRON, "sglang-0.5.23", "0.5.23",
     ["sglang 0.5.23: --kv-cache-dtype fp8 is not one of auto, fp8_e5m2, fp8_e4m3",
      "sglang 0.5.23: --pp is an ambiguous abbreviation: could be --pp-async-batch-depth, --pp-max-micro-batch-size, --pp-size"],
     ["--tp is an abbreviation of --tp-size", "--disable-cuda-graph is deprecated"]),
    ("vLLM underscores and dotted JSON keys", ["vllm", "serve", "m", "--max_model_len", "4096",
                                               "--compilation-config.level", "3"], "vllm-0.20.0", "0.20.0", [], []),
    ("missing value", ["vllm", "serve", "m", "--max-model-len", "--enforce-eager"], "vllm-0.20.0", "0.20.0",
     ["vllm 0.20.0: --max-model-len expects a value"], []),
    ("value on a bare flag", ["vllm", "serve", "m", "--enforce-eager=yes"], "vllm-0.20.0", "0.20.0",
     ["--enforce-eager takes no value (got 'yes')"], []),
    ("stray argument", ["vllm", "serve", "m", "extra"], "vllm-0.20.0", "0.20.0",
     ["vllm 0.20.0: unexpected argument 'extra'"], []),
    ("tool parser outside the list: a plugin may add it", ["vllm", "serve", "m", "--tool-call-parser", "mine"],
     "vllm-0.20.0", "0.20.0", [], ["--tool-call-parser mine is not one of"]),
    ("nargs + and negative numbers", ["vllm", "serve", "m", "--api-key", "a", "b", "--seed", "-1"],
     "vllm-0.20.0", "0.20.0", [], []),
]


@pytest.mark.parametrize("args, build, version, errors, warnings", [c[1:] for c in CHECK_CASES],
                         ids=[c[0] for c in CHECK_CASES])
def test_check_argv(args, build, version, errors, warnings):
    engine = build.split("-")[0]
    out = flagcheck.check_argv(args, HELP[build], engine, version)
    assert out["ok"] is (not errors)
    assert len(out["errors"]) == len(errors), out["errors"]
    for got, want in zip(out["errors"], errors):
        assert want in got
    for want in warnings:
        assert any(want in w for w in out["warnings"]), out["warnings"]


def test_gate_hint_names_the_version_bound():
    profile = {"gates": {"--swap-space": {"max_version": "0.17", "reason": "removed in vLLM 0.18"}}}
    out = flagcheck.check_argv(["vllm", "serve", "m", "--swap-space", "0"], HELP["vllm-0.20.0"], "vllm", "0.20.0", profile)
    assert out["errors"] == ["vllm 0.20.0: unknown flag --swap-space: this build's --help does not list it "
                             "(--swap-space is not available in vllm 0.20.0: needs <= 0.17 (removed in vLLM 0.18))"]


def test_gates_are_checked_even_when_the_help_accepts_the_flag():
    # a build whose --help still lists a flag the profile refuses for that version
    profile = {"gates": {"--async-scheduling": {"min_version": "0.21"}}}
    out = flagcheck.check_argv(["vllm", "serve", "m", "--async-scheduling"], HELP["vllm-0.20.0"], "vllm", "0.20.0", profile)
    assert out["errors"] == ["vllm 0.20.0: --async-scheduling is not available in vllm 0.20.0: needs >= 0.21"]


def test_the_sglang_launcher_is_understood():
    args = ["/v/bin/python", "/opt/llmfleet/lib/llmfleet_sglang_launch.py", "--model-path", "m", "--tp-size", "1"]
    out = flagcheck.check_argv(args, HELP["sglang-0.5.23"], "sglang", "0.5.23")
    assert out["ok"] and out["flags"] == ["--model-path", "--tp-size"]


# ------------------------------------------------------------------------------------------------
# the help cache (engine_flags module): its file name and content
# ------------------------------------------------------------------------------------------------
IMAGE_ID = "sha256:" + "4f7c0a19be2d" + "0" * 52


@pytest.mark.parametrize("engine, version, image, name", [
    ("vllm", "0.32.0+cpu", None, "vllm-0.32.0+cpu-help.txt"),
    ("sglang", "0.5.10.post1", None, "sglang-0.5.10.post1-help.txt"),
    ("vllm", "0.19.1rc1.dev42+g1234abc", None, "vllm-0.19.1rc1.dev42+g1234abc-help.txt"),
    # the build inside an image: its short ID too (two images of one version may differ)
    ("vllm", "0.32.0+cpu", IMAGE_ID, "vllm-0.32.0+cpu-4f7c0a19be2d-help.txt"),
    ("vllm", "0.32.0+cpu", IMAGE_ID[len("sha256:"):], "vllm-0.32.0+cpu-4f7c0a19be2d-help.txt"),
    ("vllm", "0.32.0+cpu", "nvcr.io/nvidia/vllm:25.09", None),
    ("vllm", "0.32.0+cpu", "../etc", None),
    ("vllm", "../../etc/x", None, None),
    ("vllm", "", None, None),
    ("vllm", "0.1 beta", None, None),
    ("../vllm", "0.32.0", None, None),
])
def test_help_cache_name(engine, version, image, name):
    if name is None:
        with pytest.raises(ValueError, match="cannot name a help cache file"):
            flagcheck.help_cache_name(engine, version, image)
    else:
        assert flagcheck.help_cache_name(engine, version, image) == name


@pytest.mark.parametrize("stdout, cached", [
    ("usage: x\n", "usage: x\n"),
    ("usage: x\n\n\n", "usage: x\n"),
    ("usage: x\r\n", "usage: x\n"),
    ("usage: x", "usage: x\n"),
])
def test_cache_text_is_stdout_plus_one_newline(stdout, cached):
    assert flagcheck.cache_text(stdout) == cached


def test_summary_names_count_build_and_warnings():
    result = {"flags": ["--a", "--b"], "warnings": ["w1", "w2"]}
    assert flagcheck.summary_message("vllm", "0.32.0", result) == "2 flags known to vllm 0.32.0; warnings: w1; w2"
    assert flagcheck.summary_message("vllm", "0.32.0", dict(result, warnings=[])) == "2 flags known to vllm 0.32.0"


# ------------------------------------------------------------------------------------------------
# value ranges (flagcheck.VALUE_RANGES): a share of the GPU memory is above 0 and at most 1
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build, engine, args, error", [
    ("vllm-0.33.0", "vllm", "--gpu-memory-utilization 0.9", None),
    ("vllm-0.33.0", "vllm", "--gpu-memory-utilization 1", None),
    ("vllm-0.33.0", "vllm", "--gpu-memory-utilization 1.5", "--gpu-memory-utilization 1.5 is outside 0 < x <= 1"),
    ("vllm-0.33.0", "vllm", "--gpu-memory-utilization=0", "--gpu-memory-utilization 0 is outside 0 < x <= 1"),
    ("vllm-0.33.0", "vllm", "--gpu-memory-utilization most", "--gpu-memory-utilization most is not a number"),
    ("sglang-0.5.23", "sglang", "--mem-fraction-static 0.85", None),
    ("sglang-0.5.23", "sglang", "--mem-fraction-static 1.2", "--mem-fraction-static 1.2 is outside 0 < x <= 1"),
])
def test_value_ranges(build, engine, args, error):
    launcher = "vllm serve m" if engine == "vllm" else "python -m sglang.launch_server --model-path m"
    result = flagcheck.check_argv(argv(f"{launcher} {args}"), HELP[build], engine, build.split("-", 1)[1])
    if error is None:
        assert result["ok"], result["errors"]
    else:
        assert not result["ok"] and any(error in e for e in result["errors"]), result["errors"]
