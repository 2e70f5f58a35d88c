"""llm_server in check mode on a host without systemd (the GPU test VMs): it still renders the unit."""
from pathlib import Path

import pytest


from ansible_collections.llmfleet.cluster.plugins.modules import llm_server
from uthelper import run_module


def run(monkeypatch, args, path):
    monkeypatch.setenv('PATH', str(path))
    out = run_module(monkeypatch, llm_server, args)
    return dict(out.result, failed=out.failed)


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


def stub_systemctl(tmp_path, active_state):
    """A stand-in systemctl (no systemd in unit tests): answers `show` from a table, logs the rest.
    The real-systemd path is in molecule/cluster (test_serve_lifecycle's failed-load recovery)."""
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    log = tmp_path / 'calls'
    script = bindir / 'systemctl'
    script.write_text('#!/bin/sh\n'
                      'echo "$*" >> %s\n'
                      'case "$*" in\n'
                      '  "show -p ActiveState --value"*) echo %s ;;\n'
                      '  "show -p NRestarts --value"*) echo 0 ;;\n'
                      '  "show -p UnitFileState --value"*) echo enabled ;;\n'
                      'esac\n' % (log, active_state))
    script.chmod(0o755)
    return bindir, log


def calls(log):
    return [line.split()[0] for line in log.read_text().splitlines() if not line.startswith('show')]


def existing_unit(tmp_path, check=False, **over):
    a = dict(args(tmp_path, check), **over)
    (tmp_path / 'units').mkdir()
    (tmp_path / 'units' / 'llmfleet-serve-tiny.service').write_text('[Service]\nExecStart=/old\n')
    return a


# ActiveState -> whether state=stopped stops it. 'activating' is a crash loop between restarts:
# left alone, the old argv comes back when RestartSec ends (CI: an old API rank joined the new
# headless ranks into its doomed session)
STOP_TABLE = [('active', True), ('activating', True), ('deactivating', True), ('failed', False), ('inactive', False)]


@pytest.mark.parametrize('active_state,stops', STOP_TABLE)
def test_stopped_stops_every_state_that_has_or_will_have_a_process(monkeypatch, tmp_path, active_state, stops):
    bindir, log = stub_systemctl(tmp_path, active_state)
    res = run(monkeypatch, existing_unit(tmp_path, state='stopped'), bindir)
    assert not res['failed'], res
    assert res['changed'] is stops
    assert ('stop' in calls(log)) is stops


@pytest.mark.parametrize('kill_on_stop, expected', [
    (False, ['stop']),
    (True, ['kill --kill-whom=all --signal=SIGKILL', 'stop']),  # every process, then the stop job
])
def test_kill_on_stop_kills_every_process_before_the_stop(monkeypatch, tmp_path, kill_on_stop, expected):
    bindir, log = stub_systemctl(tmp_path, 'active')
    res = run(monkeypatch, existing_unit(tmp_path, state='stopped', kill_on_stop=kill_on_stop), bindir)
    assert not res['failed'] and res['changed'], res
    verbs = [line.rsplit(' ', 1)[0] for line in log.read_text().splitlines() if line.startswith(('kill', 'stop'))]
    assert verbs == expected


@pytest.mark.parametrize('active_state,verb', [('activating', 'restart'), ('failed', 'start'), ('inactive', 'start')])
def test_new_files_restart_a_crash_looping_unit_now(monkeypatch, tmp_path, active_state, verb):
    bindir, log = stub_systemctl(tmp_path, active_state)
    res = run(monkeypatch, existing_unit(tmp_path), bindir)
    assert not res['failed'], res
    assert res['restarted']
    assert calls(log) == ['daemon-reload', 'enable', verb]


LIMITS = Path(__file__).resolve().parents[2] / 'fixtures' / 'limits'
PODMAN_MEMLOCK = ('Limit                     Soft Limit           Hard Limit           Units     \n'
                  'Max locked memory         8388608              8388608              bytes     \n')


# limits_from_pid1, requested (nofile, memlock), PID 1's /proc/1/limits, the unit's LimitNOFILE= / LimitMEMLOCK=
@pytest.mark.parametrize('clamp, nofile, memlock, pid1, want_nofile, want_memlock', [
    (True, 65536, 'infinity', 'controller_pid1.txt', 32768, 'infinity'),   # above the hard limit: lowered
    (True, 20000, 'infinity', 'controller_pid1.txt', 20000, 'infinity'),   # below: as asked
    (True, 20000, 'infinity', PODMAN_MEMLOCK, 20000, '8388608'),            # the sim's podman memlock
    (True, 65536, 'infinity', None, 65536, 'infinity'),                     # unreadable: as asked
    (False, 65536, 'infinity', 'controller_pid1.txt', 65536, 'infinity'),  # off: as asked
])
def test_limits_from_pid1(monkeypatch, tmp_path, clamp, nofile, memlock, pid1, want_nofile, want_memlock):
    empty = tmp_path / 'bin'
    empty.mkdir()
    limits = tmp_path / 'pid1_limits'
    if pid1:
        limits.write_text((LIMITS / pid1).read_text() if pid1.endswith('.txt') else pid1)
    monkeypatch.setattr(llm_server, 'PID1_LIMITS', str(limits))
    res = run(monkeypatch, dict(args(tmp_path, True), limit_nofile=nofile, limit_memlock=memlock,
                                limits_from_pid1=clamp), empty)
    assert not res['failed'], res
    assert 'LimitNOFILE=%d\n' % want_nofile in res['diff']['after']
    assert 'LimitMEMLOCK=%s\n' % want_memlock in res['diff']['after']
    assert (res['limit_nofile'], res['limit_memlock']) == (want_nofile, want_memlock)
