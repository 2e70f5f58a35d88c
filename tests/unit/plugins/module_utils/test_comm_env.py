"""Tests for plugins/module_utils/comm_env.py and the llmfleet.cluster.comm_env filters."""
import copy
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.cluster.plugins.filter.comm_env import FilterModule
from ansible_collections.llmfleet.cluster.plugins.module_utils import comm_env as ce

# Per-host facts as the fabric/rdma_info steps produce them (values from the field notes).
SPARK1 = {'fabric_ip': '192.168.100.10', 'fabric_iface': 'enp1s0f1np1',
          'rdma_up_netdevs': ['enp1s0f1np1', 'enP2p1s0f1np1'],
          'nccl_ib_hca': 'rocep1s0f1,roceP2p1s0f1'}
SPARK2 = {'fabric_ip': '192.168.100.11', 'fabric_iface': 'enp1s0f0np0',
          'rdma_up_netdevs': ['enp1s0f0np0'],
          'nccl_ib_hca': 'rocep1s0f0'}
THOR1 = {'fabric_ip': '10.0.0.27', 'fabric_iface': 'mgbe0_0',
         'rdma_up_netdevs': [], 'nccl_ib_hca': ''}
THOR2 = {'fabric_ip': '10.0.0.26', 'fabric_iface': 'mgbe1_0'}   # rdma facts absent entirely
SPARK_DOWN = {'fabric_ip': '192.168.100.12', 'fabric_iface': 'enP7s7',
              'rdma_up_netdevs': [], 'nccl_ib_hca': ''}          # Spark with no cable

FACTS = {'spark1': SPARK1, 'spark2': SPARK2, 'thor1': THOR1, 'thor2': THOR2, 'spark3': SPARK_DOWN}

FILTERS = FilterModule().filters()


# ------------------------------------------------------------------- transport

@pytest.mark.parametrize('group, transport', [
    (['spark1', 'spark2'], 'roce'),
    (['spark1'], 'roce'),
    (['spark1', 'spark2', 'thor1'], 'socket'),           # mixed Spark + Thor
    (['spark1', 'thor2'], 'socket'),                     # rdma facts missing = no RDMA
    (['spark1', 'spark3'], 'socket'),                    # a Spark whose ports are Down
    (['thor1', 'thor2'], 'socket'),
    (['spark1', 'spark2', 'spark1'], 'roce'),            # duplicates ignored
    (('spark1', 'spark2'), 'roce'),
])
def test_cluster_transport(group, transport):
    assert ce.cluster_transport(FACTS, group) == transport
    assert FILTERS['cluster_transport'](FACTS, group) == transport


@pytest.mark.parametrize('host_facts, expected', [
    ({'rdma_up_netdevs': ['a'], 'nccl_ib_hca': 'x'}, True),
    ({'rdma_up_netdevs': 'a,b', 'nccl_ib_hca': ['x', 'y']}, True),
    ({'rdma_up_netdevs': ['a'], 'nccl_ib_hca': ''}, False),
    ({'rdma_up_netdevs': [], 'nccl_ib_hca': 'x'}, False),
    ({'rdma_up_netdevs': ' , ', 'nccl_ib_hca': ' ,'}, False),
    ({}, False),
])
def test_has_rdma(host_facts, expected):
    assert ce.has_rdma(host_facts) is expected


def test_forced_transports():
    assert ce.cluster_transport(FACTS, ['spark1', 'spark2'], transport='socket') == 'socket'
    assert ce.cluster_transport(FACTS, ['spark1', 'spark2'], transport='roce') == 'roce'
    with pytest.raises(ce.CommEnvError, match=r"thor1, thor2"):
        ce.cluster_transport(FACTS, ['spark1', 'thor1', 'thor2'], transport='roce')
    with pytest.raises(ce.CommEnvError, match='transport must be one of'):
        ce.cluster_transport(FACTS, ['spark1'], transport='ib')


# group, forced transport, the plan's transport, the words of the refusal ('' = none: the detected one)
@pytest.mark.parametrize('group, transport, planned, words', [
    (['spark1', 'spark2'], 'auto', 'roce', ''),
    (['spark1', 'thor1'], 'auto', 'socket', ''),
    (['spark1', 'spark2'], 'auto', '', ''),                          # no plan (a CPU profile): nothing checked
    (['spark1', 'spark2'], 'socket', 'socket', ''),                  # pinned on both sides
    (['spark1', 'spark3'], 'auto', 'roce', 'lays the serving group (spark1, spark3) out on roce (the transport its '
     'platforms imply), but the fabric detected socket: no Up RDMA device on spark3. Fix: bring up'),
    (['spark1', 'spark2'], 'auto', 'socket', 'detected roce: every host of the group has Up RDMA devices. Fix: set '
     'fabric_transport: roce'),
])
def test_the_detected_transport_confirms_the_plan(group, transport, planned, words):
    if not words:
        assert ce.cluster_transport(FACTS, group, transport, planned) == (planned or ce.cluster_transport(FACTS, group))
        return
    with pytest.raises(ce.CommEnvError, match=re.escape(words)):
        ce.cluster_transport(FACTS, group, transport, planned)
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        FILTERS['cluster_transport'](FACTS, group, transport, planned=planned)


# ---------------------------------------------------------------- environments

def test_all_spark_roce():
    env = ce.compute_comm_env(FACTS, ['spark1', 'spark2'])
    assert env == {
        'spark1': {
            'NCCL_SOCKET_IFNAME': 'enp1s0f1np1',
            'GLOO_SOCKET_IFNAME': 'enp1s0f1np1',
            'TP_SOCKET_IFNAME': 'enp1s0f1np1',
            'UCX_NET_DEVICES': 'enp1s0f1np1,enP2p1s0f1np1',
            'NCCL_IB_HCA': 'rocep1s0f1,roceP2p1s0f1',
            'NCCL_IB_DISABLE': '0',
            'VLLM_HOST_IP': '192.168.100.10',
            'SGLANG_HOST_IP': '192.168.100.10',
        },
        'spark2': {
            'NCCL_SOCKET_IFNAME': 'enp1s0f0np0',
            'GLOO_SOCKET_IFNAME': 'enp1s0f0np0',
            'TP_SOCKET_IFNAME': 'enp1s0f0np0',
            'UCX_NET_DEVICES': 'enp1s0f0np0',
            'NCCL_IB_HCA': 'rocep1s0f0',
            'NCCL_IB_DISABLE': '0',
            'VLLM_HOST_IP': '192.168.100.11',
            'SGLANG_HOST_IP': '192.168.100.11',
        },
    }


def test_mixed_spark_thor_is_socket_everywhere():
    env = ce.compute_comm_env(FACTS, ['spark1', 'spark2', 'thor1'])
    assert set(env) == {'spark1', 'spark2', 'thor1'}
    for host, host_env in env.items():
        assert host_env['NCCL_IB_DISABLE'] == '1', host
        assert 'NCCL_IB_HCA' not in host_env, host
        assert host_env['UCX_NET_DEVICES'] == FACTS[host]['fabric_iface']
    # the Sparks keep their own interface even though RDMA is off
    assert env['spark1']['NCCL_SOCKET_IFNAME'] == 'enp1s0f1np1'
    assert env['thor1'] == {
        'NCCL_SOCKET_IFNAME': 'mgbe0_0',
        'GLOO_SOCKET_IFNAME': 'mgbe0_0',
        'TP_SOCKET_IFNAME': 'mgbe0_0',
        'UCX_NET_DEVICES': 'mgbe0_0',
        'NCCL_IB_DISABLE': '1',
        'VLLM_HOST_IP': '10.0.0.27',
        'SGLANG_HOST_IP': '10.0.0.27',
    }


def test_only_group_hosts_are_returned():
    env = ce.compute_comm_env(FACTS, ['thor1'])
    assert list(env) == ['thor1']


def test_no_value_leaks_between_hosts():
    group = ['spark1', 'spark2', 'thor1', 'thor2', 'spark3']
    for transport in ('auto', 'socket'):
        env = ce.compute_comm_env(FACTS, group, host_overrides={'thor1': {'NCCL_DEBUG': 'TRACE'}},
                                  transport=transport)
        for host in group:
            own = FACTS[host]
            others = set()
            for other in group:
                if other != host:
                    f = FACTS[other]
                    others |= {f['fabric_ip'], f['fabric_iface']}
                    others |= set(ce._as_list(f.get('nccl_ib_hca')))
                    others |= set(ce._as_list(f.get('rdma_up_netdevs')))
            others -= set(ce._as_list(own.get('rdma_up_netdevs'))) | {own['fabric_iface']}
            values = set()
            for value in env[host].values():
                values |= set(value.split(','))
            assert not values & others, (host, values & others)
            assert env[host]['VLLM_HOST_IP'] == own['fabric_ip']
            assert env[host]['NCCL_SOCKET_IFNAME'] == own['fabric_iface']
        assert 'NCCL_DEBUG' not in env['thor2'] and env['thor1']['NCCL_DEBUG'] == 'TRACE'
    # each host gets its own dict: changing one changes no other
    env['spark1']['EXTRA'] = 'x'
    assert all('EXTRA' not in env[h] for h in group if h != 'spark1')


def test_inputs_are_not_modified():
    facts = copy.deepcopy(FACTS)
    overrides = {'NCCL_DEBUG': 'INFO'}
    host_overrides = {'spark1': {'NCCL_IB_HCA': None}}
    ce.compute_comm_env(facts, ['spark1', 'spark2'], overrides, host_overrides)
    assert facts == FACTS
    assert overrides == {'NCCL_DEBUG': 'INFO'}
    assert host_overrides == {'spark1': {'NCCL_IB_HCA': None}}


@pytest.mark.parametrize('overrides, host_overrides, host, expected', [
    # global override on every host
    ({'NCCL_DEBUG': 'INFO'}, None, 'spark2', {'NCCL_DEBUG': 'INFO'}),
    # per-host beats global
    ({'NCCL_DEBUG': 'INFO'}, {'spark1': {'NCCL_DEBUG': 'WARN'}}, 'spark1', {'NCCL_DEBUG': 'WARN'}),
    ({'NCCL_DEBUG': 'INFO'}, {'spark1': {'NCCL_DEBUG': 'WARN'}}, 'spark2', {'NCCL_DEBUG': 'INFO'}),
    # overrides beat computed values
    ({'NCCL_IB_HCA': '=rocep1s0f1'}, None, 'spark1', {'NCCL_IB_HCA': '=rocep1s0f1'}),
    (None, {'spark2': {'UCX_NET_DEVICES': 'rocep1s0f0:1'}}, 'spark2', {'UCX_NET_DEVICES': 'rocep1s0f0:1'}),
    # null removes a variable
    (None, {'spark1': {'TP_SOCKET_IFNAME': None}}, 'spark1', {'TP_SOCKET_IFNAME': ce}),
    ({'GLOO_SOCKET_IFNAME': None}, {'spark1': {'GLOO_SOCKET_IFNAME': 'enp1s0f1np1'}}, 'spark1',
     {'GLOO_SOCKET_IFNAME': 'enp1s0f1np1'}),
    # YAML scalars become env strings
    ({'NCCL_P2P_DISABLE': 1, 'NCCL_SHM_DISABLE': True, 'X_FLOAT': 0.5, 'X_OFF': False}, None, 'spark2',
     {'NCCL_P2P_DISABLE': '1', 'NCCL_SHM_DISABLE': '1', 'X_FLOAT': '0.5', 'X_OFF': '0'}),
    # overrides for hosts outside the group are ignored
    (None, {'thor9': {'NCCL_DEBUG': 'INFO'}}, 'spark1', {'NCCL_DEBUG': ce}),
])
def test_overrides(overrides, host_overrides, host, expected):
    env = ce.compute_comm_env(FACTS, ['spark1', 'spark2'], overrides, host_overrides)[host]
    for key, value in expected.items():
        if value is ce:   # sentinel: must be absent
            assert key not in env
        else:
            assert env[key] == value


def test_override_values_through_filter():
    env = FILTERS['comm_env'](FACTS, ['spark1', 'thor1'], overrides={'NCCL_PROTO': 'Simple'},
                              host_overrides={'thor1': {'NCCL_SOCKET_IFNAME': 'mgbe0_0,mgbe1_0'}})
    assert env['spark1']['NCCL_PROTO'] == env['thor1']['NCCL_PROTO'] == 'Simple'
    assert env['thor1']['NCCL_SOCKET_IFNAME'] == 'mgbe0_0,mgbe1_0'
    assert env['spark1']['NCCL_SOCKET_IFNAME'] == 'enp1s0f1np1'
    assert env['spark1']['NCCL_IB_DISABLE'] == '1'


def test_forced_socket_on_all_spark():
    env = ce.compute_comm_env(FACTS, ['spark1', 'spark2'], transport='socket')
    assert env['spark1']['NCCL_IB_DISABLE'] == '1'
    assert 'NCCL_IB_HCA' not in env['spark1']
    assert env['spark1']['UCX_NET_DEVICES'] == 'enp1s0f1np1'


# ---------------------------------------------------------------------- errors

@pytest.mark.parametrize('facts, group, message', [
    ({'spark1': SPARK1, 'thor1': dict(THOR1, fabric_iface='')}, ['spark1', 'thor1'],
     r"host 'thor1' in the serving group has no fabric_iface\. Fix: give it llmfleet_fabric_ip"),
    ({'spark1': SPARK1}, ['spark1', 'thor1'],
     r"host 'thor1' in the serving group has no fabric_iface"),
    ({'spark1': SPARK1, 'thor1': dict(THOR1, fabric_iface=None)}, ['spark1', 'thor1'],
     r"'thor1'.*no fabric_iface"),
    ({'thor1': dict(THOR1, fabric_iface='^lo,docker,tailscale,veth')}, ['thor1'],
     r"'thor1'.*not a single interface name.*exclusion lists"),
    ({'thor1': dict(THOR1, fabric_iface='enp1s0f0np0,enP2p1s0f0np0')}, ['thor1'],
     r"not a single interface name"),
    ({'spark1': SPARK1, 'thor1': dict(THOR1, fabric_iface='lo')}, ['spark1', 'thor1'],
     r"'thor1' has fabric_iface lo \(loopback\), but the serving group has several hosts"),
    ({'thor1': dict(THOR1, fabric_ip='')}, ['thor1'], r"'thor1' in the serving group has no fabric_ip"),
    ({'thor1': dict(THOR1, fabric_ip='fe80::1')}, ['thor1'], r"not a usable IPv4"),
    ({'spark1': SPARK1, 'thor1': dict(THOR1, fabric_ip='127.0.0.2')}, ['spark1', 'thor1'],
     r"'thor1' has fabric_ip '127.0.0.2', a loopback address, in a serving group of several hosts"),
    ({'thor1': dict(THOR1, fabric_ip='thor1.lan')}, ['thor1'], r"not a usable IPv4"),
    (FACTS, [], r"serving group is empty"),
    (FACTS, 'spark1', r"must be a list of inventory hostnames"),
    (FACTS, None, r"must be a list of inventory hostnames"),
    ({'spark1': 'oops'}, ['spark1'], r"facts for host 'spark1' must be a dict"),
    (['spark1'], ['spark1'], r"per-host facts must be a dict"),
])
def test_errors_name_host_and_fix(facts, group, message):
    with pytest.raises(ce.CommEnvError, match=message):
        ce.compute_comm_env(facts, group)
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS['comm_env'](facts, group)


def test_one_host_group_talks_over_lo():
    """Every GPU in one host (inventories/gpu-host): lo and a loopback fabric IP are the fabric."""
    env = ce.compute_comm_env({'gpu1': {'fabric_iface': 'lo', 'fabric_ip': '127.0.0.2'}}, ['gpu1'],
                              transport='socket')
    assert env['gpu1']['NCCL_SOCKET_IFNAME'] == 'lo' and env['gpu1']['GLOO_SOCKET_IFNAME'] == 'lo'


def test_every_bad_host_is_named_at_once():
    facts = {'a': {'fabric_ip': '10.0.0.1'}, 'b': {'fabric_iface': 'eth0'}, 'c': SPARK1}
    with pytest.raises(ce.CommEnvError) as err:
        ce.compute_comm_env(facts, ['a', 'b', 'c'])
    text = str(err.value)
    assert "host 'a' in the serving group has no fabric_iface" in text
    assert "host 'b' in the serving group has no fabric_ip" in text
    assert "'c'" not in text


@pytest.mark.parametrize('overrides, host_overrides, message', [
    ({'BAD-NAME': 'x'}, None, r"global override 'BAD-NAME' is not a valid"),
    (None, {'spark1': {'1X': 'x'}}, r"host 'spark1' override '1X' is not a valid"),
    (['NCCL_DEBUG=INFO'], None, r"global overrides must be a dict"),
    ({'NCCL_DEBUG': ['INFO']}, None, r"environment values must be strings"),
    (None, ['spark1'], r"host_overrides must be a dict"),
])
def test_bad_overrides(overrides, host_overrides, message):
    with pytest.raises(ce.CommEnvError, match=message):
        ce.compute_comm_env(FACTS, ['spark1'], overrides, host_overrides)


# -------------------------------------------------------------------- env file

def test_render_env_file_sorted_with_header():
    env = ce.compute_comm_env(FACTS, ['spark1', 'thor1'])['spark1']
    text = ce.render_env_file(env)
    assert text == (
        ce.ENV_FILE_HEADER
        + 'GLOO_SOCKET_IFNAME=enp1s0f1np1\n'
        + 'NCCL_IB_DISABLE=1\n'
        + 'NCCL_SOCKET_IFNAME=enp1s0f1np1\n'
        + 'SGLANG_HOST_IP=192.168.100.10\n'
        + 'TP_SOCKET_IFNAME=enp1s0f1np1\n'
        + 'UCX_NET_DEVICES=enp1s0f1np1\n'
        + 'VLLM_HOST_IP=192.168.100.10\n'
    )
    assert text.startswith('# ')
    # same env in another insertion order: byte-identical (idempotent re-runs)
    assert ce.render_env_file(dict(reversed(list(env.items())))) == text
    assert FILTERS['env_file'](env) == text


@pytest.mark.parametrize('value, rendered', [
    ('enp1s0f1np1', 'enp1s0f1np1'),
    ('rocep1s0f1,roceP2p1s0f1', 'rocep1s0f1,roceP2p1s0f1'),
    ('^lo,docker', '^lo,docker'),
    ('=mlx5_0:1', '=mlx5_0:1'),
    ('', '""'),
    ('a b', "'a b'"),
    ('$HOME/x', "'$HOME/x'"),
    ('it\'s "q"', '"it\'s \\"q\\""'),
    ('back\\slash\'', '"back\\\\slash\'"'),
    ('#not-a-comment', "'#not-a-comment'"),
    (1, '1'),
    (True, '1'),
])
def test_render_env_file_quoting(value, rendered):
    assert ce.render_env_file({'K': value}, header='') == 'K=%s\n' % rendered


def test_render_env_file_skips_none_and_custom_header():
    text = ce.render_env_file({'B': '2', 'A': None, 'C': '3'}, header='# mine')
    assert text == '# mine\nB=2\nC=3\n'


@pytest.mark.parametrize('env, header, message', [
    ({'K': 'a\nb'}, None, 'control character'),
    ({'K': 'a\x00'}, None, 'control character'),
    ({'BAD KEY': 'x'}, None, 'not a valid environment variable name'),
    ({'K': {'x': 1}}, None, 'environment values must be'),
    ('K=1', None, 'env must be a dict'),
    ({'K': '1'}, 'not a comment', 'header line must be a comment'),
])
def test_render_env_file_rejects(env, header, message):
    kwargs = {} if header is None else {'header': header}
    with pytest.raises(ValueError, match=message):
        ce.render_env_file(env, **kwargs)
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS['env_file'](env, **kwargs)


def test_filter_names():
    assert set(FILTERS) == {'comm_env', 'cluster_transport', 'env_file', 'parse_env_file'}


@pytest.mark.parametrize('text,expected', [
    # what nccl.env / comm.env look like, and systemd's rules: last assignment wins, no expansion
    ('# c\nNCCL_IB_DISABLE=1\nLD_LIBRARY_PATH=/opt/n/lib:$LD_LIBRARY_PATH\n',
     {'NCCL_IB_DISABLE': '1', 'LD_LIBRARY_PATH': '/opt/n/lib:$LD_LIBRARY_PATH'}),
    ('export A="x y"\nA=z\n', {'A': 'z'}),
    ('', {}),
])
def test_parse_env_file_filter(text, expected):
    assert FILTERS['parse_env_file'](text) == expected


def test_filters_work_in_a_playbook(tmp_path):
    """End to end: ansible-playbook resolves the FQCN filters and writes an env file."""
    playbook_bin = Path(sys.executable).with_name('ansible-playbook')
    if not playbook_bin.exists():
        pytest.skip('ansible-playbook is not installed next to this Python')
    root = Path(os.path.abspath(__file__)).parents[4]   # the collection root (see tests/unit/conftest.py)
    if root.parents[1].name == 'ansible_collections':   # ansible-test's tree
        search_path = root.parents[2]
    else:
        search_path = root / '.build' / 'collections'
    (tmp_path / 'vars.json').write_text(json.dumps({
        'facts': FACTS, 'group': ['spark1', 'thor1'], 'out': str(tmp_path),
        'ansible_python_interpreter': sys.executable}))
    (tmp_path / 'play.yml').write_text(textwrap.dedent("""\
        - hosts: localhost
          gather_facts: false
          tasks:
            - name: Compute
              ansible.builtin.set_fact:
                env_all: "{{ facts | llmfleet.cluster.comm_env(group, host_overrides={'thor1': {'NCCL_DEBUG': 'INFO'}}) }}"
                transport: "{{ facts | llmfleet.cluster.cluster_transport(group) }}"
            - name: Write thor1's file
              ansible.builtin.copy:
                dest: "{{ out }}/thor1.env"
                content: "{{ env_all['thor1'] | llmfleet.cluster.env_file }}"
                mode: "0644"
            - name: Write the transport
              ansible.builtin.copy:
                dest: "{{ out }}/transport"
                content: "{{ transport }}"
                mode: "0644"
            - name: A host without fabric_iface fails the task
              block:
                - name: Bad group
                  ansible.builtin.set_fact:
                    bad: "{{ facts | llmfleet.cluster.comm_env(['spark1', 'nohost']) }}"
              rescue:
                - name: Keep the error
                  ansible.builtin.copy:
                    dest: "{{ out }}/error"
                    content: "{{ ansible_failed_result.msg }}"
                    mode: "0644"
        """))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(search_path), ANSIBLE_HOME=str(tmp_path / 'home'),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_NOCOLOR='1')
    proc = subprocess.run(
        [str(playbook_bin), '-i', 'localhost,', '-c', 'local', '-e', '@vars.json', 'play.yml'],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / 'transport').read_text() == 'socket'
    error = (tmp_path / 'error').read_text()
    assert "host 'nohost' in the serving group has no fabric_iface. Fix:" in error
    assert (tmp_path / 'thor1.env').read_text() == ce.ENV_FILE_HEADER + (
        'GLOO_SOCKET_IFNAME=mgbe0_0\n'
        'NCCL_DEBUG=INFO\n'
        'NCCL_IB_DISABLE=1\n'
        'NCCL_SOCKET_IFNAME=mgbe0_0\n'
        'SGLANG_HOST_IP=10.0.0.27\n'
        'TP_SOCKET_IFNAME=mgbe0_0\n'
        'UCX_NET_DEVICES=mgbe0_0\n'
        'VLLM_HOST_IP=10.0.0.27\n'
    )


def _lo_node(host, machine):
    return {"fabric_ip": "127.0.0.%d" % (2 + int(host[-1])), "fabric_iface": "lo", "rdma_up_netdevs": [],
            "nccl_ib_hca": "", "machine": machine,
            "emulation_env": {"CUDA_VISIBLE_DEVICES": host[-1], "NCCL_HOSTID": "gpu4-" + host} if machine else {}}


def test_emulated_nodes_of_one_machine_share_lo_and_keep_their_own_gpu_and_host_id():
    facts = {h: _lo_node(h, "gpu4") for h in ("n0", "n1")}
    env = ce.compute_comm_env(facts, ["n0", "n1"])
    assert env["n1"]["NCCL_SOCKET_IFNAME"] == "lo" and env["n1"]["NCCL_IB_DISABLE"] == "1"
    assert (env["n0"]["CUDA_VISIBLE_DEVICES"], env["n1"]["CUDA_VISIBLE_DEVICES"]) == ("0", "1")
    assert env["n1"]["NCCL_HOSTID"] == "gpu4-n1" and env["n1"]["VLLM_HOST_IP"] == "127.0.0.3"


def test_loopback_across_machines_is_refused():
    facts = {h: _lo_node(h, "") for h in ("n0", "n1")}
    with pytest.raises(ce.CommEnvError, match="loopback"):
        ce.compute_comm_env(facts, ["n0", "n1"])


@pytest.mark.parametrize('group', [['spark1', 'spark2'], ['spark1', 'spark2', 'thor1'], ['thor1']])
def test_env_names_hold_every_name_the_env_holds_on_either_transport(group):
    # the cluster plan names them before any fact (fabric.env_names): a superset of what host_env and the
    # overrides give on the transport the facts choose, less only what an override removes (value None)
    overrides = {'NCCL_DEBUG': 'WARN', 'UCX_NET_DEVICES': None}
    host_overrides = {'NCCL_DEBUG_SUBSYS': 'INIT', 'NCCL_DEBUG': None}
    env = ce.compute_comm_env(FACTS, group, overrides, {h: host_overrides for h in group})
    names = ce.env_names({'NCCL_HOSTID': 'm-x'}, overrides, host_overrides)
    for host in group:
        assert set(env[host]) <= set(names)
    assert 'NCCL_HOSTID' in names and 'NCCL_DEBUG_SUBSYS' in names
    assert 'NCCL_DEBUG' not in names and 'UCX_NET_DEVICES' not in names
    assert names == sorted(names)
