"""The llmfleet.cluster.role_state module on real files in tmp_path: a record, then a check that finds
the node current; an edited file, a stopped unit and new inputs are drift; check mode writes nothing;
the recorded facts come back only to a check that finds the node current."""
import json
import os
import stat

from ansible_collections.llmfleet.cluster.plugins.modules import role_state
from uthelper import run_module

FP = '1' * 64


def systemctl(states):
    def run(argv):
        if argv[0] == 'systemctl':
            units = argv[argv.index('--') + 1:]
            return 0, '\n\n'.join('Id=%s\nActiveState=%s\nUnitFileState=enabled' % (u, states[u]) for u in units), ''
        return 1, '', 'unexpected %s' % argv
    return run


def args(tmp_path, state='check', fingerprint=FP, **extra):
    probes = {'files': [str(tmp_path / 'comm.env')], 'units': ['ray.service'], 'dirs': [str(tmp_path / 'venv')],
              'venvs': [str(tmp_path / 'venv')], 'trees': [str(tmp_path / 'models')]}
    return dict({'role': 'fabric', 'fingerprint': fingerprint, 'state': state, 'state_dir': str(tmp_path / 'state'),
                 'probes': probes if state == 'record' else {}}, **extra)


def setup(tmp_path):
    (tmp_path / 'comm.env').write_text('NCCL_SOCKET_IFNAME=eth1\n')
    site = tmp_path / 'venv' / 'lib' / 'python3.12' / 'site-packages'
    site.mkdir(parents=True)
    (site / 'vllm-0.32.0.dist-info').mkdir()
    (site / 'vllm-0.32.0.dist-info' / 'METADATA').write_text('Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n\nbody\n')
    (tmp_path / 'venv' / 'bin').mkdir()
    os.symlink('/usr/bin/python3', str(tmp_path / 'venv' / 'bin' / 'python'))
    (tmp_path / 'models').mkdir()
    (tmp_path / 'models' / 'model.safetensors').write_bytes(b'0' * 8192)
    return site


def test_a_weight_rewritten_in_place_is_drift(monkeypatch, tmp_path):
    setup(tmp_path)
    running = systemctl({'ray.service': 'active'})
    run_module(monkeypatch, role_state, args(tmp_path, 'record'), commands=running)
    weights = tmp_path / 'models' / 'model.safetensors'
    stamp = os.stat(weights)
    with open(weights, 'r+b') as handle:  # same size, as `dd conv=notrunc` leaves it
        handle.seek(4096)
        handle.write(b'XXXX')
    os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1000))
    out = run_module(monkeypatch, role_state, args(tmp_path), commands=running)
    assert [d.split(':')[0] for d in out.result['drift']] == ['trees %s' % (tmp_path / 'models')]


def test_record_then_current_then_drift(monkeypatch, tmp_path):
    site = setup(tmp_path)
    running = systemctl({'ray.service': 'active'})
    rec = run_module(monkeypatch, role_state, args(tmp_path, 'record', facts={'fabric_iface': 'eth1'}), commands=running)
    assert not rec.failed and rec.result['changed']
    path = tmp_path / 'state' / 'fabric.json'
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(path.read_text())['observed']['venvs'][str(tmp_path / 'venv')]['distributions'] == 1
    again = run_module(monkeypatch, role_state, args(tmp_path, 'record', facts={'fabric_iface': 'eth1'}), commands=running)
    assert not again.result['changed']

    ok = run_module(monkeypatch, role_state, args(tmp_path), commands=running)
    assert ok.result['current'] and ok.result['drift'] == [] and not ok.result['changed']
    assert ok.result['facts'] == {'fabric_iface': 'eth1'}

    (tmp_path / 'comm.env').write_text('NCCL_SOCKET_IFNAME=eth9\n')
    edited = run_module(monkeypatch, role_state, args(tmp_path), commands=running)
    assert not edited.result['current'] and edited.result['facts'] == {}
    assert [d.split(':')[0] for d in edited.result['drift']] == ['files %s' % (tmp_path / 'comm.env')]

    (tmp_path / 'comm.env').write_text('NCCL_SOCKET_IFNAME=eth1\n')
    stopped = run_module(monkeypatch, role_state, args(tmp_path), commands=systemctl({'ray.service': 'failed'}))
    assert stopped.result['drift'] == ["units ray.service: 'failed/enabled', was 'active/enabled'"]

    # a version edited in place (the dist-info keeps its name) and a package installed by hand
    (site / 'vllm-0.32.0.dist-info' / 'METADATA').write_text('Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.9\n')
    edited_version = run_module(monkeypatch, role_state, args(tmp_path), commands=running)
    assert len(edited_version.result['drift']) == 1 and edited_version.result['drift'][0].startswith('venvs ')
    (site / 'vllm-0.32.0.dist-info' / 'METADATA').write_text('Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n\nbody\n')
    assert run_module(monkeypatch, role_state, args(tmp_path), commands=running).result['current']
    (site / 'ray-2.50.0.dist-info').mkdir()
    by_hand = run_module(monkeypatch, role_state, args(tmp_path), commands=running)
    assert len(by_hand.result['drift']) == 1 and by_hand.result['drift'][0].startswith('venvs ')

    new_inputs = run_module(monkeypatch, role_state, args(tmp_path, fingerprint='2' * 64), commands=running)
    assert new_inputs.result['drift'][0].startswith("the role's inputs changed")


def test_check_mode_record_writes_nothing(monkeypatch, tmp_path):
    setup(tmp_path)
    out = run_module(monkeypatch, role_state, args(tmp_path, 'record'), commands=systemctl({'ray.service': 'active'}),
                     check_mode=True)
    assert out.result['changed'] and not (tmp_path / 'state').exists()
    check = run_module(monkeypatch, role_state, args(tmp_path), commands=systemctl({'ray.service': 'active'}), check_mode=True)
    assert not check.result['current'] and check.result['drift'] == ['no record of a full run of this role']


def test_bad_input_fails_naming_it(monkeypatch, tmp_path):
    out = run_module(monkeypatch, role_state, dict(args(tmp_path), fingerprint='nope'))
    assert out.failed and "fingerprint 'nope'" in out.result['msg']


def test_a_snapshot_observes_every_record_in_one_call(monkeypatch, tmp_path):
    setup(tmp_path)
    running = systemctl({'ray.service': 'active'})
    run_module(monkeypatch, role_state, args(tmp_path, 'record'), commands=running)
    other = dict(args(tmp_path, 'record'), role='ray_node', probes={'units': ['ray.service']}, facts={'k': 'v'})
    run_module(monkeypatch, role_state, other, commands=running)
    common = dict(args(tmp_path), role='common', snapshot=True)
    out = run_module(monkeypatch, role_state, common, commands=running)
    assert not out.result['current']  # common has no record of its own yet
    snap = out.result['snapshot']
    assert sorted(snap) == ['fabric', 'ray_node'] and snap['fabric']['fingerprint'] == FP
    assert snap['fabric']['drift'] == [] and snap['ray_node']['drift'] == [] and snap['ray_node']['facts'] == {'k': 'v'}
    assert len([c for c in out.calls if c[0] == 'systemctl']) == 1  # every record's units in one call
    stopped = run_module(monkeypatch, role_state, common, commands=systemctl({'ray.service': 'failed'}))
    assert stopped.result['snapshot']['ray_node']['drift'] == ["units ray.service: 'failed/enabled', was 'active/enabled'"]


def test_two_inventory_hosts_on_one_machine_keep_their_own_records(monkeypatch, tmp_path):
    setup(tmp_path)
    running = systemctl({'ray.service': 'active'})
    for host, fp in (('nodea', '1' * 64), ('nodeb', '2' * 64)):
        run_module(monkeypatch, role_state, dict(args(tmp_path, 'record', fingerprint=fp), host=host), commands=running)
    assert sorted(os.listdir(tmp_path / 'state')) == ['nodea', 'nodeb']
    assert stat.S_IMODE(os.stat(tmp_path / 'state' / 'nodea').st_mode) == 0o700
    for host, fp in (('nodea', '1' * 64), ('nodeb', '2' * 64)):
        out = run_module(monkeypatch, role_state, dict(args(tmp_path, fingerprint=fp), host=host), commands=running)
        assert out.result['current'], (host, out.result['drift'])
    bad = run_module(monkeypatch, role_state, dict(args(tmp_path), host='../x'), commands=running)
    assert bad.failed and 'not a plain name' in bad.result['msg']


def test_hashed_trees_see_what_size_and_mtime_hide_and_stay_out_of_a_snapshot(monkeypatch, tmp_path):
    setup(tmp_path)
    running = systemctl({'ray.service': 'active'})
    models = dict(args(tmp_path, 'record'), role='models', probes={'hashed_trees': [str(tmp_path / 'models')]})
    run_module(monkeypatch, role_state, models, commands=running)
    weights = tmp_path / 'models' / 'model.safetensors'
    stamp = os.stat(weights)
    weights.write_bytes(b'1' + b'0' * 8191)  # same size, and the old mtime put back
    os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    out = run_module(monkeypatch, role_state, dict(args(tmp_path), role='models'), commands=running)
    assert [d.split(':')[0] for d in out.result['drift']] == ['hashed_trees %s' % (tmp_path / 'models')]
    snap = run_module(monkeypatch, role_state, dict(args(tmp_path), role='common', snapshot=True), commands=running)
    assert 'models' not in snap.result['snapshot']  # its role's own call hashes, not every playbook's first check


def test_a_rerun_asked_for_is_not_current_whatever_the_record(monkeypatch, tmp_path):
    setup(tmp_path)
    running = systemctl({'ray.service': 'active'})
    run_module(monkeypatch, role_state, args(tmp_path, 'record', facts={'serve_unit': 'x'}), commands=running)
    out = run_module(monkeypatch, role_state, args(tmp_path, rerun='serve_state is restarted'), commands=running)
    assert not out.result['current'] and out.result['drift'] == ['serve_state is restarted']
    assert out.result['facts'] == {}
    assert run_module(monkeypatch, role_state, args(tmp_path), commands=running).result['current']
