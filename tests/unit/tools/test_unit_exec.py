"""tests/gpu/unit_exec.py: starts a rendered unit without systemd and answers is-active/list-units as
systemctl does, in the format playbooks/validate.yml parses (validate_report.parse_serve_units)."""
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_unit, validate_report

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
UNIT_EXEC = os.path.join(REPO, 'tests', 'gpu', 'unit_exec.py')


def run(state, *args):
    env = dict(os.environ, UNIT_EXEC_STATE_DIR=str(state))
    p = subprocess.run([sys.executable, UNIT_EXEC] + list(args), env=env, capture_output=True, text=True, timeout=60, check=False)
    return p.returncode, p.stdout


@pytest.fixture
def unit(tmp_path):
    env_file = tmp_path / 'engine.env'
    env_file.write_text('FOO=bar\n')
    text = serve_unit.render_unit('llmfleet-serve-qwen3.5-tiny', ['/bin/sleep', '60'], 'nobody', 'nogroup',
                                  [str(env_file), '-/nonexistent.env'], str(tmp_path), 'vllm qwen3.5-tiny rank 0 (API)',
                                  'abc', hardening=False)
    path = tmp_path / 'llmfleet-serve-qwen3.5-tiny.service'
    path.write_text(text)
    return path


def test_start_is_active_list_units_stop(tmp_path, unit):
    state = tmp_path / 'state'
    pidfile = tmp_path / 'serve.pid'
    # nothing started yet: inactive, exit 3 (systemctl's answer for an unknown unit)
    assert run(state, 'is-active', 'llmfleet-serve-qwen3.5-tiny') == (3, 'inactive\n')
    rc, _out = run(state, 'start', str(unit), '--log', str(tmp_path / 'log'), '--pidfile', str(pidfile), '--as-root')
    assert rc == 0
    try:
        assert run(state, 'is-active', 'llmfleet-serve-qwen3.5-tiny.service') == (0, 'active\n')
        rc, out = run(state, 'list-units', '--all', '--plain', '--no-legend', '--type=service', 'llmfleet-serve-*')
        assert rc == 0
        units = validate_report.parse_serve_units(out)
        assert [(u['unit'], u['active'], u['sub'], u['model'], u['rank'], u['api']) for u in units] == \
            [('llmfleet-serve-qwen3.5-tiny', 'active', 'running', 'qwen3.5-tiny', 0, True)]
        assert run(state, 'list-units', 'llmfleet-ray*')[1] == ''
        # the environment came from the unit's EnvironmentFile= only (FOO), the missing optional one skipped
        pid = int(pidfile.read_text())
        environ = open('/proc/%d/environ' % pid, 'rb').read().split(b'\0')
        assert b'FOO=bar' in environ
    finally:
        run(state, 'stop', '--pidfile', str(pidfile), '--grace', '5')
    deadline = time.time() + 10
    while time.time() < deadline and run(state, 'is-active', 'llmfleet-serve-qwen3.5-tiny')[0] == 0:
        time.sleep(0.2)
    assert run(state, 'is-active', 'llmfleet-serve-qwen3.5-tiny') == (3, 'inactive\n')
    out = run(state, 'list-units', 'llmfleet-serve-*')[1]
    assert validate_report.parse_serve_units(out)[0]['active'] == 'inactive'
