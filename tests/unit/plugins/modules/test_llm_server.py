"""llm_server in check mode on a host without systemd (the GPU test VMs): it still renders the unit."""
from pathlib import Path

import pytest


from ansible_collections.llmfleet.cluster.plugins.modules import llm_server
from loopback_http import JsonHandler, serving
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


# ---- the smoke completion against a real HTTP server answering as an engine's chat API would
class _Failed(Exception):
    pass


class _Module:
    """What Server.smoke uses of AnsibleModule: params, fail_json (raises), get_bin_path."""
    check_mode = True

    def __init__(self, **params):
        self.params = dict({'name': 'llmfleet-serve-x', 'unit_dir': '/nonexistent', 'env_dir': '/nonexistent',
                            'api_key': '', 'smoke_prompt': 'Say hello.', 'smoke_expect': ''}, **params)

    def fail_json(self, **kw):
        raise _Failed(kw['msg'])

    def get_bin_path(self, *_a, **_k):
        return None


@pytest.fixture
def chat_api():
    import json
    seen = []

    class Handler(JsonHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
            seen.append(body)
            answer = 'The capital of France is Paris.' if 'France' in body['messages'][0]['content'] else 'Hi there'
            self.send_json(200, {'choices': [{'message': {'content': answer}}], 'usage': {'completion_tokens': 7}})

    with serving(Handler) as port:
        yield 'http://127.0.0.1:%d' % port, seen


@pytest.mark.parametrize('prompt, expect, passes', [
    ('What is the capital of France? Answer in one word.', 'Paris', True),
    ('Say hello.', '', True),                      # no expected text: any answer passes
    ('Say hello.', 'Paris', False),                # the model answers, but not what it must
])
def test_the_smoke_asks_the_profiles_question_and_checks_its_answer(chat_api, prompt, expect, passes):
    url, seen = chat_api
    server = llm_server.Server(_Module(health_url=url, served_model_name='smollm2', smoke_prompt=prompt, smoke_expect=expect))
    if passes:
        out = server.smoke()
        assert out['completion_tokens'] == 7 and out['text']
    else:
        with pytest.raises(_Failed) as err:
            server.smoke()
        assert "does not contain 'Paris'" in str(err.value) and "'Hi there'" in str(err.value)
    assert seen[-1]['messages'][0]['content'] == prompt
    assert seen[-1]['max_tokens'] == (16 if expect else 8)


IMAGE = 'localhost/llmfleet-engine@sha256:' + 'ab' * 32


def stub_podman(bindir, log, images):
    """A stand-in podman (no container engine in unit tests) that knows `images`; the real one serves
    the sim's container group (molecule/cluster test_container_runtime.py)."""
    script = bindir / 'podman'
    script.write_text('#!/bin/sh\necho "podman $*" >> %s\n'
                      'case "$*" in\n  "image inspect"*) for i in %s; do [ "$5" = "$i" ] && echo sha256:0 && exit 0; done;'
                      ' echo "no such image" >&2; exit 125 ;;\nesac\n' % (log, ' '.join(images)))
    script.chmod(0o755)


def container_args(tmp_path, check, image=IMAGE, **extra):
    env_file = tmp_path / 'comm.env'
    env_file.write_text('# the comm env\nNCCL_SOCKET_IFNAME=eth1\nVLLM_HOST_IP="10.231.1.16"\n')
    a = dict(args(tmp_path, check), env_files=[str(env_file), '-' + str(tmp_path / 'absent.env')],
             secret_env={'VLLM_API_KEY': 'sekret-key'}, user='root', group='root',
             container=dict({'image': image, 'mounts': ['/m:/m:ro']}, **extra))
    return a


def test_a_container_unit_runs_the_argv_in_the_image_with_the_env_by_name(monkeypatch, tmp_path):
    bindir, log = stub_systemctl(tmp_path, 'inactive')
    stub_podman(bindir, log, [IMAGE])
    res = run(monkeypatch, container_args(tmp_path, True), bindir)
    assert not res['failed'], res
    unit = res['diff']['after']
    exec_start = next(line for line in unit.splitlines() if line.startswith('ExecStart='))
    argv = exec_start[len('ExecStart='):].split()
    assert argv[:2] == [str(bindir / 'podman'), 'run'] and '--replace' in argv
    assert argv[argv.index('--user') + 1] == '0:0'
    assert argv[argv.index(IMAGE) + 1:] == ['/opt/v/bin/vllm', 'serve', '/m']
    # every variable by name, in file order, then the unit's own; no value, no secret in argv
    names = [argv[i + 1] for i, a in enumerate(argv) if a == '--env']
    assert names == ['NCCL_SOCKET_IFNAME', 'VLLM_HOST_IP', 'RAY_ADDRESS', 'VLLM_API_KEY']
    assert 'sekret' not in unit and '10.231.1.16' not in exec_start
    assert '--volume /m:/m:ro' in exec_start and '--network host --ipc host' in exec_start
    assert 'User=root' in unit and 'ProtectSystem' not in unit


def test_a_new_image_digest_changes_the_hash_the_same_one_does_not(monkeypatch, tmp_path):
    bindir, log = stub_systemctl(tmp_path, 'inactive')
    other = 'localhost/llmfleet-engine@sha256:' + 'cd' * 32
    stub_podman(bindir, log, [IMAGE, other])
    first = run(monkeypatch, container_args(tmp_path, True), bindir)['hash']
    again = run(monkeypatch, container_args(tmp_path, True), bindir)['hash']
    moved = run(monkeypatch, container_args(tmp_path, True, image=other), bindir)['hash']
    assert first == again != moved


@pytest.mark.parametrize('image, says', [
    ('localhost/llmfleet-engine:latest', 'not pinned by digest'),
    ('nvcr.io/nvidia/vllm@sha256:' + 'ef' * 32, 'is not on this node'),
])
def test_an_unpinned_or_absent_image_fails_naming_it(monkeypatch, tmp_path, image, says):
    bindir, log = stub_systemctl(tmp_path, 'inactive')
    stub_podman(bindir, log, [IMAGE])
    res = run(monkeypatch, container_args(tmp_path, False, image=image), bindir)
    assert res['failed'] and says in res['msg'] and image in res['msg'], res
    assert not (tmp_path / 'units').exists()
