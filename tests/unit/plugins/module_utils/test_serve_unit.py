"""Unit/env rendering and hashing of engine units (llm_server)."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_unit as su

ARGV_RANK0 = ["/opt/llmfleet/venvs/current/bin/vllm", "serve", "/opt/llmfleet/models/tiny-llama",
              "--tensor-parallel-size", "2", "--nnodes", "2", "--node-rank", "0",
              "--master-addr", "10.231.1.11", "--host", "10.231.1.11", "--port", "8000"]
ARGV_RAY = ["/opt/llmfleet/venvs/current/bin/vllm", "serve", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
            "--pipeline-parallel-size", "4", "--distributed-executor-backend", "ray",
            "--reasoning-parser-plugin", "/opt/llmfleet/files/super v3.py"]
ARGV_SGLANG = ["/opt/llmfleet/venvs/current/bin/python", "-m", "sglang.launch_server", "--model-path", "m",
               "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.25:29501"]


def unit(argv, digest="abc", **kw):
    return su.render_unit("llmfleet-serve-x", argv, "llmfleet", "llmfleet",
                          ["/etc/llmfleet/comm.env", "-/etc/llmfleet/engine.env", "/etc/llmfleet/x.env"],
                          "/var/lib/llmfleet", "test", digest, **kw)


@pytest.mark.parametrize("argv", [ARGV_RANK0, ARGV_RAY, ARGV_SGLANG])
def test_unit_runs_argv_as_service_user_with_env_files(argv):
    text = unit(argv)
    assert "User=llmfleet" in text and "Group=llmfleet" in text
    assert "EnvironmentFile=/etc/llmfleet/comm.env" in text
    assert "EnvironmentFile=-/etc/llmfleet/engine.env" in text
    exec_line = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")][0]
    assert exec_line.startswith("ExecStart=" + argv[0])
    assert "Restart=always" in text and "KillMode=mixed" in text
    assert su.installed_hash(text) == "abc"


def test_argument_with_space_is_quoted_for_systemd():
    text = unit(ARGV_RAY)
    assert '"/opt/llmfleet/files/super v3.py"' in text


@pytest.mark.parametrize("arg,quoted", [
    ("plain", "plain"),
    ("10.0.0.25:29501", "10.0.0.25:29501"),
    ("a b", '"a b"'),
    ("$HOME", '"$$HOME"'),
    ("50%", '"50%%"'),
    ('say "hi"', '"say \\"hi\\""'),
])
def test_systemd_quote(arg, quoted):
    assert su.systemd_quote(arg) == quoted


def test_hardening_and_memory_max_are_optional():
    hard = unit(ARGV_RANK0, memory_max="100G")
    assert "NoNewPrivileges=yes" in hard and "MemoryMax=100G" in hard
    soft = unit(ARGV_RANK0, hardening=False)
    assert "NoNewPrivileges=yes" not in soft and "MemoryMax" not in soft


def test_hash_changes_with_flag_env_release_and_secret_but_not_order_of_env():
    base = su.serve_hash(ARGV_RANK0, {"A": "1", "B": "2"}, "r1", {"VLLM_API_KEY": "k"})
    assert base == su.serve_hash(ARGV_RANK0, {"B": "2", "A": "1"}, "r1", {"VLLM_API_KEY": "k"})
    assert base != su.serve_hash(ARGV_RANK0 + ["--enforce-eager"], {"A": "1", "B": "2"}, "r1", {"VLLM_API_KEY": "k"})
    assert base != su.serve_hash(ARGV_RANK0, {"A": "1", "B": "3"}, "r1", {"VLLM_API_KEY": "k"})
    assert base != su.serve_hash(ARGV_RANK0, {"A": "1", "B": "2"}, "r2", {"VLLM_API_KEY": "k"})
    assert base != su.serve_hash(ARGV_RANK0, {"A": "1", "B": "2"}, "r1", {"VLLM_API_KEY": "other"})


def test_secret_never_in_unit_text():
    digest = su.serve_hash(ARGV_RANK0, {}, "r", {"VLLM_API_KEY": "s3cret"})
    assert "s3cret" not in unit(ARGV_RANK0, digest=digest)
    assert "s3cret" not in digest


def test_env_file_sorted_and_quoted():
    text = su.render_env({"VLLM_API_KEY": "a b", "B": "x", "EMPTY": ""})
    lines = text.splitlines()
    assert lines[1:] == ["B=x", 'EMPTY=""', "VLLM_API_KEY='a b'"]
    with pytest.raises(ValueError):
        su.render_env({"X": "line\nbreak"})


def test_installed_hash_absent():
    assert su.installed_hash("[Unit]\nDescription=x\n") is None
    assert su.installed_hash(None) is None


# real /metrics lines of vLLM 0.32 (CPU build) during one streaming request, and of SGLang
VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny-llama"} 1.0
vllm:num_requests_waiting{engine="0",model_name="tiny-llama"} 0.0
"""
SGLANG_METRICS = 'sglang:num_running_reqs{model_name="m"} 3.0\nsglang:num_queue_reqs{model_name="m"} 1.0\n'


@pytest.mark.parametrize("text,expected", [
    (VLLM_METRICS, 1.0),
    (VLLM_METRICS.replace("} 1.0", "} 0.0"), 0.0),
    # a request queued behind a busy batch is in flight too
    (VLLM_METRICS.replace("running{engine=\"0\",model_name=\"tiny-llama\"} 1.0",
                          "running{engine=\"0\",model_name=\"tiny-llama\"} 0.0")
     .replace("waiting{engine=\"0\",model_name=\"tiny-llama\"} 0.0",
              "waiting{engine=\"0\",model_name=\"tiny-llama\"} 2.0"), 2.0),
    (VLLM_METRICS.replace("waiting{engine=\"0\",model_name=\"tiny-llama\"} 0.0",
                          "waiting{engine=\"0\",model_name=\"tiny-llama\"} 2.0"), 3.0),
    (SGLANG_METRICS, 4.0),
    ("# nothing here\n", None),
    ("", None),
])
def test_running_requests(text, expected):
    assert su.running_requests(text) == expected


def test_limit_nofile_is_rendered_as_given():
    # the serve role passes min(serve_limit_nofile, PID 1's hard limit) (raynet.clamp_nofile)
    assert "LimitNOFILE=20000" in unit(ARGV_RAY).splitlines()
    text = su.render_unit("x", ARGV_RAY, "llmfleet", "llmfleet", [], "/var/lib/llmfleet", "d", "abc",
                          limit_nofile=4096)
    assert "LimitNOFILE=4096" in text.splitlines() and "LimitNOFILE=20000" not in text


@pytest.mark.parametrize('image, digest', [
    ('nvcr.io/nvidia/vllm@sha256:' + 'a' * 64, 'a' * 64),
    ('sha256:' + 'b' * 64, 'b' * 64),
    ('nvcr.io/nvidia/vllm:25.09-py3', ''),
    ('nvcr.io/nvidia/vllm@sha256:' + 'a' * 63, ''),
    ('repo:sha256:' + 'a' * 64, ''),
    ('nvcr.io/nvidia/vllm@sha256:' + 'A' * 64, ''),
    ('', ''),
])
def test_image_digest(image, digest):
    assert su.image_digest(image) == digest


def test_env_names_reads_names_only():
    text = '# Managed\n\nA=1\nexport B="two words"\n; comment\nA=again\nnot a line\nC=\n'
    assert su.env_names(text) == ['A', 'B', 'C']


def test_container_argv_on_docker_has_no_podman_only_flags():
    container = {'engine': '/usr/bin/docker', 'image': 'i@sha256:' + 'a' * 64, 'gpus': True, 'devices': ['/dev/infiniband']}
    out = su.container_argv('u', ['vllm', 'serve'], container, ['X'], '1:2', '/var/lib/llmfleet')
    assert '--replace' not in out and '--cgroups' not in out
    assert out[out.index('--gpus') + 1] == 'all' and out[out.index('--device') + 1] == '/dev/infiniband'
    assert out[-3:] == ['i@sha256:' + 'a' * 64, 'vllm', 'serve']


@pytest.mark.parametrize('nproc, want', [(4096, ['--ulimit', 'nproc=4096:4096']), (None, [])])
def test_container_argv_passes_the_hosts_process_limit_only_when_there_is_one(nproc, want):
    container = {'engine': '/usr/bin/podman', 'image': 'sha256:' + 'c' * 64}
    out = su.container_argv('u', ['vllm', 'serve'], container, [], '1:2', '/w', limit_nproc=nproc)
    got = [a for i, a in enumerate(out) if a.startswith('nproc=') or (a == '--ulimit' and out[i + 1].startswith('nproc='))]
    assert got == want


@pytest.mark.parametrize('engine', ['/usr/bin/podman', '/usr/bin/docker'])
def test_a_container_logs_once_through_its_unit(engine):
    # attached in the foreground, the unit's journal gets the output; a logging driver wrote it twice
    out = su.container_argv('u', ['vllm', 'serve'], {'engine': engine, 'image': 'sha256:' + 'c' * 64}, [], '1:2', '/w')
    assert out[out.index('--log-driver') + 1] == 'none' and out.count('--log-driver') == 1
