"""One harness for every module unit test: run a module's main() with given args and stand-ins
for AnsibleModule's I/O (exit/fail, warn, run_command, get_bin_path), and return what it exited
with plus the commands it ran and the warnings it gave.

    out = run_module(monkeypatch, gpu_info, {}, commands=lambda argv: (0, "...", ""),
                     bins={"nvidia-smi": "/usr/bin/nvidia-smi"})
    assert not out.failed and out.result["gpu_count"] == 1
"""
import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    """Raised by the stand-in exit_json/fail_json so main() stops where the module would exit."""

    def __init__(self, result, failed):
        super().__init__(result)
        self.result = result
        self.failed = failed
        self.calls = []
        self.warnings = []


def run_module(monkeypatch, module, args, commands=None, bins=None, check_mode=False, diff=False):
    """Run ``module.main()``.

    commands: callable(argv) -> (rc, out, err) standing in for run_command (None: not replaced).
    bins: {tool name: path} answering get_bin_path (None: not replaced).
    Returns the ModuleExit, with ``calls`` (argv lists given to run_command) and ``warnings``.
    """
    calls, warnings = [], []

    def exit_json(self, **kwargs):
        raise ModuleExit(kwargs, failed=False)

    def fail_json(self, **kwargs):
        raise ModuleExit(kwargs, failed=True)

    def run_command(self, argv, *a, **kw):
        calls.append(list(argv))
        return commands(list(argv))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    if commands is not None:
        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    if bins is not None:
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                            lambda self, name, required=False, opt_dirs=None: bins.get(name))
    full = dict(args)
    if check_mode:
        full["_ansible_check_mode"] = True
    if diff:
        full["_ansible_diff"] = True
    with patch_module_args(full):
        with pytest.raises(ModuleExit) as exc:
            module.main()
    exc.value.calls, exc.value.warnings = calls, warnings
    return exc.value
