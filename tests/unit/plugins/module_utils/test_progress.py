"""Pure parts of the wait_progress action (module_utils/progress.py): log lines as a progress line
shows them, the elapsed time, the poll schedule and when a line is due."""

from __future__ import annotations

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils.progress import (
    clean_line, final_line, format_elapsed, meaningful_line, poll_delay, progress_line, report_due)

# real lines from the sim's engine journals (vLLM 0.11 mp, SGLang) and a uv/tqdm build log
CLEAN = [
    ("INFO 11-24 22:10:01 [default_loader.py:267] Loading weights took 1.32 seconds",
     "Loading weights took 1.32 seconds"),
    ("(EngineCore_DP0 pid=4242) INFO 11-24 22:10:05 [gpu_model_runner.py:2653] Model loading took 2.05 GiB and 3.1 seconds",
     "Model loading took 2.05 GiB and 3.1 seconds"),
    ("(RayWorkerWrapper pid=77) WARNING 11-24 22:10:05 [utils.py:12] Falling back to eager mode",
     "Falling back to eager mode"),
    ("[2026-11-24 22:11:02 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16",
     "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16"),
    ("[2026-11-24 22:11:09] INFO:     Started server process [311]", "INFO: Started server process [311]"),
    ("2026-11-24 22:11:09,123 - ray - INFO - Connected", "Connected"),
    ("\x1b[32mINFO\x1b[0m 11-24 22:10:01 [api_server.py:1] vLLM API server version 0.11.0",
     "vLLM API server version 0.11.0"),
    # tqdm redraws in place: the last segment is the state now
    ("Loading safetensors checkpoint shards:   0% Completed | 0/2\rLoading safetensors checkpoint shards:  50% Completed | 1/2\r",
     "Loading safetensors checkpoint shards: 50% Completed | 1/2"),
    # a key, a token or a header never reaches a progress line, whatever the engine prints
    ("non-default args: {'api_key': 'sk-abc123', 'model': 'tiny'}", "non-default args: {'api_key': '***', 'model': 'tiny'}"),
    ("Namespace(api_key=sk-abc123, port=8000)", "Namespace(api_key=***, port=8000)"),
    ("curl -H 'Authorization: Bearer sk-abc123' http://x", "curl -H 'Authorization: Bearer ***' http://x"),
    ("HF_TOKEN=hf_abcdefghijklmnop used", "HF_TOKEN=*** used"),
    ("downloading hf_abcdefghijklmnop", "downloading hf_***"),
    ("", ""),
    ("   \r  ", ""),
]


@pytest.mark.parametrize(("raw", "shown"), CLEAN)
def test_clean_line(raw, shown):
    assert clean_line(raw) == shown


MEANINGFUL = [
    (["Building wheel for vllm", "", "   "], "Building wheel for vllm"),
    (["Started", "----------------", "^^^^^^"], "Started"),
    (["a", "INFO 11-24 22:10:01 [x.py:1] "], "a"),  # a prefix with nothing after it says nothing
    ([], ""),
    (None, ""),
    (["=====", ""], ""),
    (["x" * 200], "x" * 137 + "..."),
]


@pytest.mark.parametrize(("lines", "line"), MEANINGFUL)
def test_meaningful_line(lines, line):
    assert meaningful_line(lines) == line


@pytest.mark.parametrize(("secs", "text"), [
    (0, "0 s"), (44.6, "45 s"), (59.4, "59 s"), (60, "1 min 00 s"), (185, "3 min 05 s"),
    (3599, "59 min 59 s"), (3600, "1 h 00 min"), (3725, "1 h 02 min"), (-3, "0 s"),
])
def test_format_elapsed(secs, text):
    assert format_elapsed(secs) == text


@pytest.mark.parametrize(("elapsed", "poll", "fast", "window", "delay"), [
    (0, 10, 2, 180, 2),       # fast phase
    (179, 10, 2, 180, 1),     # the fast phase ends on time, not a full fast poll after it
    (180, 10, 2, 180, 10),    # slow phase
    (0, 10, 0, 180, 10),      # no fast phase
    (0, 30, 0, 0, 30),
    (0, 0, 0, 0, 0.5),        # never a busy loop
])
def test_poll_delay(elapsed, poll, fast, window, delay):
    assert poll_delay(elapsed, poll, fast, window) == delay


@pytest.mark.parametrize(("elapsed", "last", "every", "due"), [
    (5, 0, 15, False), (15, 0, 15, True), (29, 15, 15, False), (30.2, 15, 15, True), (100, 0, 0, False),
])
def test_report_due(elapsed, last, every, due):
    assert report_due(elapsed, last, every) is due


@pytest.mark.parametrize(("args", "line"), [
    (("spark1", "tiny-llama loading", 45, "Loading weights took 1.32 seconds", "engine log"),
     "spark1: tiny-llama loading 45 s (engine log: Loading weights took 1.32 seconds)"),
    (("controller", "wheelhouse gb10-sim build", 185, "", "log"), "controller: wheelhouse gb10-sim build 3 min 05 s"),
])
def test_progress_line(args, line):
    assert progress_line(*args) == line


@pytest.mark.parametrize(("status", "line"), [
    ({"finished": 1, "rc": 0}, "spark1: x done after 47 s"),
    ({"finished": 1, "changed": True}, "spark1: x done after 47 s"),
    ({"finished": 1, "changed": False}, "spark1: x done after 47 s (no change)"),
    ({"finished": 1, "changed": False, "failed": True}, "spark1: x failed after 47 s"),
    ({"finished": 1, "rc": 2, "failed": True}, "spark1: x failed (rc 2) after 47 s"),
    ({"finished": 1, "failed": True, "msg": "died while loading"}, "spark1: x failed after 47 s"),
])
def test_final_line(status, line):
    assert final_line("spark1", "x", 47.2, status) == line
