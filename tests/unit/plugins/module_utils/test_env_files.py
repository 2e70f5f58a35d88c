"""env_files.declared_env: merge order, missing files, the name filter."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import env_files

AUDIT = r'^(NCCL_|GLOO_|UCX_|VLLM_|TP_SOCKET|MASTER_ADDR$|LD_LIBRARY_PATH$|LD_PRELOAD$)'
COMM = "# comm.env\nNCCL_SOCKET_IFNAME=eth1\nGLOO_SOCKET_IFNAME=eth1\nVLLM_HOST_IP=10.231.1.11\n"
RAY = "HOME=/var/lib/llmfleet\nRAY_USAGE_STATS_ENABLED=0\nVLLM_HOST_IP='10.231.1.99'\n"


@pytest.mark.parametrize("texts, include, want", [
    ([COMM, None, RAY], AUDIT,
     {"NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1", "VLLM_HOST_IP": "10.231.1.99"}),
    ([RAY, COMM], AUDIT,
     {"NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1", "VLLM_HOST_IP": "10.231.1.11"}),
    ([None, None], AUDIT, {}),
    ([], "", {}),
    ([RAY], "", {"HOME": "/var/lib/llmfleet", "RAY_USAGE_STATS_ENABLED": "0", "VLLM_HOST_IP": "10.231.1.99"}),
    # MASTER_ADDR$ is the whole name, not a prefix
    (["MASTER_ADDR=a\nMASTER_ADDRESS=b\nLD_PRELOAD=x.so\n"], AUDIT, {"MASTER_ADDR": "a", "LD_PRELOAD": "x.so"}),
])
def test_declared_env(texts, include, want):
    assert env_files.declared_env(texts, include) == want
