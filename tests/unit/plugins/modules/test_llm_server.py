"""llm_server in check mode on a host without systemd (the GPU test VMs): it still renders the unit."""
import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmfleet.cluster.plugins.modules import llm_server


class ModuleExit(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


def run(monkeypatch, args, path):
    def exit_json(self, **kw):
        raise ModuleExit(dict(kw, failed=False))

    def fail_json(self, **kw):
        raise ModuleExit(dict(kw, failed=True))

    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', fail_json)
    monkeypatch.setenv('PATH', str(path))
    with patch_module_args(args):
        with pytest.raises(ModuleExit) as exc:
            llm_server.main()
    return exc.value.result


def args(tmp_path, check):
    return {'name': 'llmfleet-serve-tiny', 'state': 'started', 'argv': ['/opt/v/bin/vllm', 'serve', '/m'],
            'env': {'RAY_ADDRESS': '127.0.0.2:6379'}, 'unit_dir': str(tmp_path / 'units'),
            'env_dir': str(tmp_path / 'env'), '_ansible_check_mode': check}


def test_check_mode_without_systemctl_renders_the_unit(monkeypatch, tmp_path):
    empty = tmp_path / 'bin'
    empty.mkdir()
    res = run(monkeypatch, args(tmp_path, True), empty)
    assert not res['failed'], res
    assert res['changed'] and res['restarted']
    assert 'ExecStart=/opt/v/bin/vllm serve /m' in res['diff']['after']
    assert not (tmp_path / 'units').exists()  # check mode wrote nothing


def test_real_run_without_systemctl_fails(monkeypatch, tmp_path):
    empty = tmp_path / 'bin'
    empty.mkdir()
    res = run(monkeypatch, args(tmp_path, False), empty)
    assert res['failed'] and 'systemctl' in res['msg']
