"""The deploy summary's lines: layout, and that the pasted examples are valid shell and Python."""
import ast
import shlex
import subprocess

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import summary as s

NODES = {
    "spark2": {"cluster": "sim", "gpu_arch": "sm_121", "fabric_ip": "10.231.1.12", "ray_role": "worker"},
    "spark1": {"cluster": "sim", "gpu_arch": "sm_121", "fabric_ip": "10.231.1.11", "ray_role": "head"},
}
EP = {"url": "http://10.231.1.11:8000/v1", "model": "tiny-llama", "engine": "vllm", "backend": "ray",
      "nodes": 2, "tp": 2, "pp": 1}
RAY = {"node_count": 2, "nodes": [{"ip": "10.231.1.11"}, {"ip": "10.231.1.12"}], "cpus": 4, "gpus": 0}


@pytest.mark.parametrize("ep,line", [
    (EP, "Endpoint: http://10.231.1.11:8000/v1 model tiny-llama engine vllm backend ray nodes 2 tp 2 pp 1"),
    ({"url": "http://h:30000/v1", "model": "m", "engine": "sglang", "tp": 1},
     "Endpoint: http://h:30000/v1 model m engine sglang tp 1"),
    # the cluster's gateway: one URL, every model it routes to
    ({"url": "http://10.231.1.11:8080/v1", "model": "a", "models": ["a", "b"]},
     "Endpoint: http://10.231.1.11:8080/v1 model a gateway for a, b"),
    # the container runtime is named; the venv (the default) is not
    (dict(EP, backend="mp", nodes=1, tp=1, runtime="container"),
     "Endpoint: http://10.231.1.11:8000/v1 model tiny-llama engine vllm backend mp nodes 1 tp 1 pp 1 runtime container"),
    (dict(EP, runtime="venv"), "Endpoint: http://10.231.1.11:8000/v1 model tiny-llama engine vllm backend ray nodes 2 tp 2 pp 1"),
])
def test_endpoint_line(ep, line):
    assert s.endpoint_line(ep) == line


@pytest.mark.parametrize("ep", [{"url": "http://h/v1"}, {"model": "m"}, {"url": "", "model": "m"}])
def test_endpoint_without_url_or_model_is_refused(ep):
    with pytest.raises(s.SummaryError):
        s.endpoint_line(ep)


def test_endpoints_must_be_a_list():
    with pytest.raises(s.SummaryError):
        s.summary_lines(NODES, EP)


def test_layout_one_line_per_node_and_endpoint():
    lines = s.summary_lines(NODES, [EP, dict(EP, url="http://10.231.1.13:8000/v1")], "/k/api key", RAY)
    assert lines[:3] == [
        "spark1: cluster=sim arch=sm_121 fabric=10.231.1.11 ray=head",
        "spark2: cluster=sim arch=sm_121 fabric=10.231.1.12 ray=worker",
        "Ray: 2 nodes alive (10.231.1.11, 10.231.1.12), 4 CPUs, 0 GPUs",
    ]
    assert sum(line.startswith("Endpoint: ") for line in lines) == 2
    assert "API key file: /k/api key" in lines
    assert not any("[" == line[:1] or "\\n" in line for line in lines)
    assert not any(line.startswith("Prometheus") for line in lines)


def test_the_prometheus_url_when_the_cluster_runs_one():
    lines = s.summary_lines(NODES, [EP], None, RAY, prometheus_url="http://10.231.0.11:9090/")
    assert lines[lines.index("API key file: none (the endpoint takes no key)") + 1] == (
        "Prometheus: http://10.231.0.11:9090 (targets http://10.231.0.11:9090/targets, alerts http://10.231.0.11:9090/alerts)")


@pytest.mark.parametrize("key_file", ["/home/ops/.config/llmfleet/sim/api key", None])
def test_curl_is_one_shell_command_with_the_url_model_and_key(key_file):
    argv = shlex.split(s.curl_line(EP, key_file))
    assert argv[:3] == ["curl", "-s", "http://10.231.1.11:8000/v1/chat/completions"]
    assert '"model": "tiny-llama"' in argv[-1]
    auth = argv[argv.index("-H") + 1]
    assert auth == "Authorization: Bearer " + ("$(cat '%s')" % key_file if key_file else "$LLMFLEET_API_KEY")


@pytest.mark.parametrize("key_file", ["/k/api-key", None])
def test_python_example_parses_and_bash_accepts_the_heredoc(key_file):
    lines = s.python_lines(EP, key_file)
    assert lines[0] == "python3 - <<'EOF'" and lines[-1] == "EOF"
    code = "\n".join(lines[1:-1])
    ast.parse(code)
    assert 'base_url="http://10.231.1.11:8000/v1"' in code and 'model="tiny-llama"' in code
    # bash -n: the pasted block is complete shell (the here-document ends)
    subprocess.run(["bash", "-n"], input="\n".join(lines) + "\n", text=True, check=True)
