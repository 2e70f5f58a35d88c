"""The llmfleet.cluster.env_files_info module on real env files in tmp_path."""
from ansible_collections.llmfleet.cluster.plugins.modules import env_files_info
from uthelper import run_module


def test_reads_merges_and_skips_missing_files(monkeypatch, tmp_path):
    (tmp_path / "comm.env").write_text("NCCL_SOCKET_IFNAME=eth1\nVLLM_HOST_IP=10.231.1.11\n")
    (tmp_path / "ray.env").write_text("HOME=/var/lib/llmfleet\nVLLM_HOST_IP=10.231.1.12\n")
    paths = [str(tmp_path / "comm.env"), str(tmp_path / "engine.env"), str(tmp_path / "ray.env")]
    out = run_module(monkeypatch, env_files_info, {"paths": paths, "include": "^(NCCL_|VLLM_)"}, check_mode=True)
    assert not out.failed and not out.result["changed"]
    assert out.result["env"] == {"NCCL_SOCKET_IFNAME": "eth1", "VLLM_HOST_IP": "10.231.1.12"}
    assert out.result["found"] == [paths[0], paths[2]]


def test_fails_on_an_unreadable_path_and_a_bad_regex(monkeypatch, tmp_path):
    (tmp_path / "dir.env").mkdir()
    out = run_module(monkeypatch, env_files_info, {"paths": [str(tmp_path / "dir.env")]})
    assert out.failed and out.result["msg"].startswith(str(tmp_path / "dir.env") + ": ")
    bad = run_module(monkeypatch, env_files_info, {"paths": [], "include": "("})
    assert bad.failed and "is not a regular expression" in bad.result["msg"]
