# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""One host's plan: everything the roles need to know about the cluster, computed once per play.

Pure, no I/O. The filter llmfleet.cluster.cluster_plan (plugins/filter/cluster_plan.py) hands in
the inventory values, the serving groups of the host's cluster (serve_groups.plan, profiles already
resolved), the resolved profile of the host's group and its python_env variant; the role
llmfleet.cluster.plan stores the result as the fact ``llmfleet_plan``, first in every play. Roles
read that fact instead of resolving profiles, groups, unit names, URLs and paths themselves, and
instead of reading each other's variables.

Paths come from one prefix (``common_prefix``, default /opt/llmfleet) and one configuration
directory (``common_config_dir``, default /etc/llmfleet).
"""

import os

from ansible_collections.llmfleet.cluster.plugins.module_utils import comm_env as _comm_env
from ansible_collections.llmfleet.cluster.plugins.module_utils import orphans as _orphans
from ansible_collections.llmfleet.cluster.plugins.module_utils import planner as _planner
from ansible_collections.llmfleet.cluster.plugins.module_utils import platforms as _platforms
from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_groups as _groups
from ansible_collections.llmfleet.cluster.plugins.module_utils import topology as _topology
# the inventory cannot be planned: one error type for the layout (planner) and the host's plan
from ansible_collections.llmfleet.cluster.plugins.module_utils.planner import PlanError

DEFAULT_PREFIX = '/opt/llmfleet'
DEFAULT_CONFIG_DIR = '/etc/llmfleet'
DEFAULT_SERVICE = {'user': 'llmfleet', 'group': 'llmfleet', 'home': '/var/lib/llmfleet'}
DEFAULT_RAY_PORT = 6379
DEFAULT_RAY_TEMP_DIR = '/var/lib/llmfleet/ray'  # Ray's --temp-dir: its sessions, sockets and logs
# the env variables each Ray worker must carry as its node's env files declare them (ray_node's audit,
# validate's report): the inventory's ray_node_audit_vars_regex, else this
DEFAULT_RAY_AUDIT_VARS_REGEX = '^(NCCL_|GLOO_|UCX_|VLLM_|TP_SOCKET|RAY_AUTH_|MASTER_ADDR$|LD_LIBRARY_PATH$|LD_PRELOAD$)'
DEFAULT_PROMETHEUS_PORT = 9090  # the monitoring role's Prometheus (monitoring_prometheus_port)
DEFAULT_GATEWAY_PORT = 8080
DEFAULT_GATEWAY_METRICS_PORT = 29000  # the router's Prometheus metrics (sgl_router_*)
# where a source node authorizes the keys of the nodes that copy its container images (serve_image_authorized_keys)
DEFAULT_IMAGE_AUTHORIZED_KEYS = '/root/.ssh/authorized_keys'
DEFAULT_FABRIC_TRANSPORT = 'auto'  # the fabric role's default: RoCE where it is up, else sockets
DEFAULT_FABRIC_MTU = 9000  # jumbo frames on the fabric (the notes: RoCE and NCCL over sockets both want them)
CURRENT = 'current'

# The inventory variables the plan reads (per host); everything else it derives.
INPUTS = (
    'llmfleet_cluster', 'llmfleet_fabric_ip', 'llmfleet_gpu_arch', 'llmfleet_gpus_per_node', 'llmfleet_release',
    'serve_host', 'serve_unit_prefix', 'common_prefix', 'common_config_dir', 'common_service_user',
    'common_service_group', 'common_service_home', 'ray_node_port', 'ray_node_firewall', 'ray_node_auth', 'llmfleet_variants_dir',
    'llmfleet_machine', 'llmfleet_machine_gpus', 'llmfleet_cuda_devices',
    # the names of what the roles install, where the inventory renames it (the owned set: owned())
    'ray_node_unit', 'serve_unit_name', 'safeguards_serve_units',
    # where an image source authorizes its copiers' keys (container_plan, owned()'s image_keys)
    'serve_image_authorized_keys',
    # the cluster's gateway (gateway())
    'gateway_enabled', 'gateway_host', 'gateway_port', 'gateway_metrics_port',
    # the serving group's layout (serve_layout())
    'fabric_transport', 'llmfleet_tensor_parallel_size', 'llmfleet_pipeline_parallel_size',
    'llmfleet_allow_tp_over_sockets',
    # the fabric NIC's MTU (fabric configures it, preflight and validate check it)
    'fabric_mtu',
    # what the fabric role adds to or removes from each node's communication environment (fabric.env_names)
    'fabric_env_overrides', 'fabric_host_env_overrides',
    # what the node's Ray offers and audits (ray_node starts and audits it, validate judges it)
    'ray_node_num_gpus', 'ray_node_audit_vars_regex', 'ray_node_temp_dir',
    # the cluster's Prometheus (the monitoring role installs it; validate and the summary ask it)
    'monitoring_server', 'monitoring_prometheus_port', 'ansible_host',
) + tuple('ray_node_' + name for name in ('node_manager_port', 'object_manager_port', 'metrics_port',
                                          'client_server_port', 'autoscaler_metrics_port', 'dashboard_metrics_port',
                                          'agent_ports',
                                          'min_worker_port', 'max_worker_port'))

# Ray's fixed ports (instead of its random ones, so the firewall can name them), as the inventory's
# ray_node_* variables override them. Ray binds every one of them on all addresses.
DEFAULT_RAY_PORTS = {
    'node_manager_port': 6380,
    'object_manager_port': 6381,
    'metrics_port': 6382,
    'client_server_port': 10001,
    'autoscaler_metrics_port': 44217,
    # the head's dashboard process serves its own metrics on all addresses (Ray's DASHBOARD_METRIC_PORT),
    # also with --include-dashboard=false once ray[default] is installed
    'dashboard_metrics_port': 44227,
    'agent_ports': [6383, 6384, 6385],
    'min_worker_port': 10002,
    'max_worker_port': 10999,
}
# Node emulation (several inventory hosts on one machine, docs/gpu-multinode.md): node k of a
# machine moves its node-level Ray ports by k * EMULATION_PORT_STEP and its worker range by
# k * EMULATION_WORKER_STEP, so the k nodes' servers, all bound on 0.0.0.0, never meet. The GCS,
# client server and autoscaler ports are the head's alone (one per cluster): they do not move.
EMULATION_PORT_STEP = 100
EMULATION_WORKER_STEP = 1000
_HEAD_ONLY_PORTS = ('client_server_port', 'autoscaler_metrics_port', 'dashboard_metrics_port')


def _get(hostvars, host, name, default=None):
    value = (hostvars.get(host) or {}).get(name)
    return default if value is None or value == '' else value


def _flag(value):
    """An inventory boolean as Ansible's `bool` filter reads it (strings included)."""
    if isinstance(value, str):
        return value.strip().lower() in ('1', 'true', 'yes', 'on', 'y', 't')
    return bool(value)


def variants_dir(hostvars, host, default=''):
    """The directory on the controller of the python_env variant files `host` chooses from:
    ``llmfleet_variants_dir`` (a site's own variants), else ``default`` (the collection's); ``~`` expanded."""
    directory = _get(hostvars, host, 'llmfleet_variants_dir', default)
    if not isinstance(directory, str):
        raise PlanError('%s: llmfleet_variants_dir %r is not a directory path; set it to the directory of your '
                        'variant files, or leave it unset for the collection\'s' % (host, directory))
    directory = os.path.expanduser(directory)
    return directory.rstrip('/') or directory[:1]


def paths(prefix=DEFAULT_PREFIX, config_dir=DEFAULT_CONFIG_DIR, release=''):
    """The directory layout below one prefix and one configuration directory."""
    for name, value in (('common_prefix', prefix), ('common_config_dir', config_dir)):
        if not isinstance(value, str) or not value.startswith('/'):
            raise PlanError('%s %r is not an absolute path; set it to one (e.g. %s)'
                            % (name, value, DEFAULT_PREFIX if name == 'common_prefix' else DEFAULT_CONFIG_DIR))
    prefix, config_dir = prefix.rstrip('/') or '/', config_dir.rstrip('/') or '/'
    venvs = prefix + '/venvs'
    return {
        'prefix': prefix,
        'config_dir': config_dir,
        'venvs': venvs,
        'current': '%s/%s' % (venvs, CURRENT),
        'release_venv': '%s/%s' % (venvs, release) if release else '',
        'wheelhouse': prefix + '/wheelhouse',
        'build': prefix + '/build',
        'models': prefix + '/models',
        'files': prefix + '/files',
        'lib': prefix + '/lib',
        'libexec': prefix + '/libexec',
        'nccl': prefix + '/nccl',
    }


def _image_authorized_keys(hostvars, host):
    """The authorized_keys file where `host` authorizes the keys that copy its images (serve_image_authorized_keys)."""
    return _get(hostvars, host, 'serve_image_authorized_keys', DEFAULT_IMAGE_AUTHORIZED_KEYS) or DEFAULT_IMAGE_AUTHORIZED_KEYS


def image_ref(container, release):
    """The image a container group runs: the inventory's digest, else the one built for the release."""
    return container['image'] or '%s:%s' % (_groups.BUILT_IMAGE, release or 'unreleased')


def image_holders(serve_groups, container, ref, order):
    """The cluster's hosts that run image `ref` with the same container engine, in inventory order."""
    hosts = {h for g in serve_groups or [] if g.get('container') and g['container']['engine'] == container['engine']
             and image_ref(g['container'], g.get('release')) == ref for h in g['hosts']}
    return sorted(hosts, key=lambda h: (order.index(h) if h in order else len(order), h))


def image_copiers(host, serve_groups, order):
    """The hosts that copy an image from `host` (it is their image's source: container_plan's `source`),
    in inventory order: the only keys `host` authorizes for its image export (owned's image_keys)."""
    out = set()
    for group in serve_groups or []:
        container = group.get('container')
        if not container:
            continue
        holders = image_holders(serve_groups, container, image_ref(container, group.get('release')), order)
        if holders and holders[0] == host:
            out.update(holders[1:])
    return sorted(out, key=lambda h: (order.index(h) if h in order else len(order), h))


def container_plan(container, release, layout, holders=(), addresses=None, transport=''):
    """A container group's runtime on this host: the image to run (the inventory's digest, else the
    image the node builds for the release: serve_groups.BUILT_IMAGE:<release>), the venv the build
    packs, and what the engine reads inside (the model copies and the collection's launchers, read-only;
    the service home is mounted by llm_server itself).

    An image is built or pulled once per cluster, on its source (the first of `holders`, the hosts that
    run the same image), and copied from there to the others over the fabric (`addresses`: host ->
    fabric IP): `source` and `source_ip`.

    `transport`: the group's planned collective transport; on RoCE the engine gets the RDMA devices
    (/dev/infiniband: NCCL's IB verbs), which the fabric role has confirmed are up."""
    if not container:
        return {}
    ref = image_ref(container, release)
    source = holders[0] if holders else ''
    move = {'source': source, 'source_ip': (addresses or {}).get(source, '')}
    # what runs inside: the built image holds the release venv at its path on the node; an image named
    # in the inventory (NGC's, an engine project's) has the engine on its PATH, as its docs run it
    bindir = layout['current'] + '/bin/' if container['build'] else ''
    python = bindir + ('python' if bindir else 'python3')
    commands = {
        'vllm': {'executable': bindir + 'vllm', 'help': [bindir + 'vllm', 'serve', '--help=all']},
        'sglang': {'executable': python, 'help': [python, '-m', 'sglang.launch_server', '--help']},
    }
    return dict(container, ref=ref, venv=layout['release_venv'], python=python, commands=commands, **move,
                devices=['/dev/infiniband'] if transport == 'roce' else [],
                mounts=['%s:%s:ro' % (layout['models'], layout['models']), '%s:%s:ro' % (layout['lib'], layout['lib'])])


# Ray's own authentication (Ray >= 2.52): with RAY_AUTH_MODE=token every GCS, raylet and dashboard
# call carries the cluster's shared token; without it anyone who reaches a Ray port runs code as the
# service user. Ray reads the token from the file RAY_AUTH_TOKEN_PATH names (never argv, never the
# environment itself). Ray 2.60 still defaults to disabled for `ray start` clusters, and says so on
# every start; 'disabled' is written out so a later Ray's default does not change a running lab.
RAY_AUTH_MODES = ('token', 'disabled')
RAY_AUTH_TOKEN_FILE = 'ray-auth-token'


def ray_group_resource(name):
    """The Ray custom resource every node of serving group `name` offers (host_plan's ray_resources)."""
    return 'group_%s' % name


def ray_auth(mode, config_dir, host=''):
    """The Ray authentication of one node: its mode, the token file and the environment every Ray
    process and Ray client of the node (the Ray unit, engines on Ray, probes) must carry."""
    mode = str(mode if mode not in (None, '') else 'token').strip().lower()
    if mode not in RAY_AUTH_MODES:
        raise PlanError('%s: ray_node_auth %r is not one of %s; set token (the default: Ray checks the '
                        "cluster's shared token on every connection) or disabled" % (host, mode, ', '.join(RAY_AUTH_MODES)))
    if mode == 'disabled':
        return {'mode': mode, 'token_file': '', 'env': {'RAY_AUTH_MODE': 'disabled'}}
    token_file = '%s/%s' % (config_dir.rstrip('/'), RAY_AUTH_TOKEN_FILE)
    return {'mode': mode, 'token_file': token_file, 'env': {'RAY_AUTH_MODE': 'token', 'RAY_AUTH_TOKEN_PATH': token_file}}


def env_files(config_dir=DEFAULT_CONFIG_DIR, unit=''):
    """The env files the roles write under the configuration directory and the units load.

    comm (fabric), engine (python_env), nccl (nccl), ray (ray_node); serve: the engine unit's own
    0600 file with the API key (llm_server writes <config_dir>/<unit>.env); engine_unit: what every
    engine unit loads before its own, in order (a leading '-' lets systemd skip a missing file).
    """
    files = {name: '%s/%s.env' % (config_dir, name) for name in ('comm', 'engine', 'nccl', 'ray')}
    files['serve'] = '%s/%s.env' % (config_dir, unit) if unit else ''
    files['engine_unit'] = [files['comm'], '-' + files['engine'], '-' + files['nccl']]
    return files


def _int(value, host, name, what='a port number'):
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, bool) or not 0 < number < 65536:
        raise PlanError('%s: %s %r is not %s; set an integer from 1 to 65535' % (host, name, value, what))
    return number


def ray_ports(hostvars, host, index=0):
    """The Ray ports of `host`: the inventory's ray_node_* values, else DEFAULT_RAY_PORTS, moved by the
    node's place `index` on its machine where several inventory hosts share one (emulation())."""
    out = {}
    for name, default in DEFAULT_RAY_PORTS.items():
        value = _get(hostvars, host, 'ray_node_' + name, default)
        shift = 0 if name in _HEAD_ONLY_PORTS else index * (
            EMULATION_WORKER_STEP if name.endswith('worker_port') else EMULATION_PORT_STEP)
        if name == 'agent_ports':
            if not isinstance(value, (list, tuple)) or len(value) != 3:
                raise PlanError('%s: ray_node_agent_ports %r is not a list of three ports (dashboard agent '
                                'HTTP, dashboard agent gRPC, runtime-env agent); set three integers' % (host, value))
            out[name] = [_int(v, host, 'ray_node_agent_ports') + shift for v in value]
        else:
            out[name] = _int(value, host, 'ray_node_' + name) + shift
    return out


def _ray_port_set(ports, is_head, gcs_port):
    """Every port (and the worker range) a Ray node of these `ports` binds."""
    single = [ports['node_manager_port'], ports['object_manager_port'], ports['metrics_port']] + list(ports['agent_ports'])
    if is_head:
        single += [gcs_port, ports['client_server_port'], ports['autoscaler_metrics_port'], ports['dashboard_metrics_port']]
    return set(single) | set(range(ports['min_worker_port'], ports['max_worker_port'] + 1))


# An emulation on a machine with fewer GPUs than its nodes need (llmfleet_machine_gpus) shares each
# GPU between nodes; each vLLM rank then asks for this share of the GPU's memory at most, so that all
# tenants of one GPU fit (vLLM's --gpu-memory-utilization is a share of the whole GPU, its single
# tenant's 0.85-0.9 by default).
SHARED_GPU_MEMORY = 0.8
# SGLang sizes its KV pool differently: the memory free when the rank profiles, less a slack of
# (1 - --mem-fraction-static) of what was free before its model loaded (SGLang 0.5.17,
# mem_cache/kv_cache_configurator.py _profile_available_bytes). A share per tenant would leave the
# second rank on a GPU a negative budget ("Loaded weights leave no GPU memory for the KV cache"), so
# every tenant keeps the whole SHARED_GPU_MEMORY budget and a token cap (--max-total-tokens, which
# SGLang applies after that check) bounds what each one allocates: 32768 tokens is 16 requests of
# the emulation profiles' 2048-token context.
SHARED_GPU_SGLANG_TOKENS = 32768


def _machine_nodes(hostvars, host, order):
    """The inventory hosts (in order) that name `host`'s llmfleet_machine; [] when it names none."""
    machine = _get(hostvars, host, 'llmfleet_machine', '')
    return [h for h in order if _get(hostvars, h, 'llmfleet_machine', '') == machine] if machine else []


def emulation(host, hostvars, order, gpus_per_node=1):
    """What node emulation adds to `host` ({} for a real node): the inventory names the machine an
    inventory host runs on (``llmfleet_machine``); two or more hosts on one machine are emulated
    nodes of it, each with its own GPUs (CUDA_VISIBLE_DEVICES: node k of the machine gets GPUs
    k*gpus_per_node.., or ``llmfleet_cuda_devices``), its own NCCL host identity (NCCL_HOSTID: NCCL
    takes ranks with one host hash for one host and would join them over P2P/SHM instead of the
    network transport the real nodes use), its own configuration directory and its own Ray ports.
    Where the inventory says the machine has fewer GPUs (``llmfleet_machine_gpus``) the nodes share
    them, round robin, each vLLM rank with its share of the memory (SHARED_GPU_MEMORY), each SGLang
    rank with a token cap (SHARED_GPU_SGLANG_TOKENS).
    A real inventory sets no ``llmfleet_machine`` and gets none of it."""
    machine = _get(hostvars, host, 'llmfleet_machine', '')
    nodes = _machine_nodes(hostvars, host, order)
    if len(nodes) < 2:
        return {}
    index = nodes.index(host)
    machine_gpus = _get(hostvars, host, 'llmfleet_machine_gpus', None)
    if machine_gpus is not None and (isinstance(machine_gpus, bool) or not str(machine_gpus).isdigit() or int(machine_gpus) < 1):
        raise PlanError('%s: llmfleet_machine_gpus %r is not a GPU count; set the number of GPUs machine %r has '
                        '(e.g. 1), or leave it unset: each emulated node then owns its GPUs' % (host, machine_gpus, machine))
    machine_gpus = int(machine_gpus) if machine_gpus is not None else 0

    def devices(node, k):
        value = _get(hostvars, node, 'llmfleet_cuda_devices', None)
        if value is None:
            first = k * gpus_per_node
            return [(first + i) % machine_gpus if machine_gpus else first + i for i in range(gpus_per_node)]
        items = value if isinstance(value, (list, tuple)) else str(value).split(',')
        try:
            return [int(str(item).strip()) for item in items]
        except ValueError:
            raise PlanError('%s: llmfleet_cuda_devices %r is not a list of GPU indexes; set e.g. [%d]'
                            % (node, value, k)) from None

    mine = devices(host, index)
    tenants = max(sum(1 for k, other in enumerate(nodes) if gpu in devices(other, k)) for gpu in mine)
    for k, other in enumerate(nodes):
        if other != host and set(devices(other, k)) & set(mine) and not machine_gpus:
            raise PlanError('%s: llmfleet_cuda_devices %s share GPU(s) %s with %s, another emulated node of machine %r: '
                            'each node of an emulation owns its GPUs; give each host its own (llmfleet_cuda_devices, '
                            'or leave it unset: node k gets GPUs from k * llmfleet_gpus_per_node), or set '
                            'llmfleet_machine_gpus where the machine has fewer GPUs than its nodes'
                            % (host, mine, sorted(set(devices(other, k)) & set(mine)), other, machine))
    vllm_args = {'--disable-custom-all-reduce': True}
    sglang_args = {'--disable-custom-all-reduce': True}
    if tenants > 1:
        vllm_args['--gpu-memory-utilization'] = round(SHARED_GPU_MEMORY / tenants, 2)
        sglang_args.update({'--mem-fraction-static': SHARED_GPU_MEMORY, '--max-total-tokens': SHARED_GPU_SGLANG_TOKENS})
    return {
        'machine': machine,
        'index': index,
        'nodes': nodes,
        'cuda_devices': mine,
        'gpu_tenants': tenants,
        # NCCL_P2P_DISABLE / NCCL_SHM_DISABLE as the four-node field notes set them: no path between
        # two nodes' GPUs but the network, also where NCCL would find one on this machine
        'env': {'CUDA_VISIBLE_DEVICES': ','.join(str(d) for d in mine), 'NCCL_HOSTID': '%s-%s' % (machine, host),
                'NCCL_P2P_DISABLE': '1', 'NCCL_SHM_DISABLE': '1'},
        # a real node's engine would never see its peers' GPUs as local: vLLM's custom all-reduce
        # (CUDA IPC between the ranks' GPUs) must not bridge the emulated nodes either
        'engine_args': {'vllm': vllm_args, 'sglang': sglang_args},
    }


def check_emulated_ports(hostvars, host, nodes, head, gcs_port):
    """Raise PlanError where two emulated nodes of one machine would bind one Ray port."""
    mine = _ray_port_set(ray_ports(hostvars, host, nodes.index(host)), host == head, gcs_port)
    for k, other in enumerate(nodes):
        if other == host:
            continue
        shared = mine & _ray_port_set(ray_ports(hostvars, other, k), other == head, gcs_port)
        if shared:
            raise PlanError('%s: its Ray ports %s are also %s\'s, another emulated node of the same machine '
                            '(Ray binds them on every address): leave the ray_node_*_port variables unset on emulated '
                            'nodes (each gets its own from its place on the machine) or give each host its own'
                            % (host, _span(sorted(shared)), other))


def _span(ports):
    return '%d-%d' % (ports[0], ports[-1]) if len(ports) > 3 else ', '.join(str(p) for p in ports)


def _serve(host, group, profile, unit_prefix, addresses, unit_name=''):
    """This host's part of its serving group ({} when it serves nothing): its unit and URL are the
    group's (serve_groups.plan names them once), the unit unless the host's own serve_unit_name renames it."""
    if not group:
        return {}
    hosts = list(group['hosts'])
    unit, url = unit_name or group['unit'], group['url']
    head_address = addresses.get(group['head']) or ''
    # an engine on Ray runs one unit, on the group's first node; its other ranks are Ray workers there
    unit_hosts = hosts[:1] if group.get('backend') == 'ray' else hosts
    runs_unit = host in unit_hosts
    return dict(group, hosts=hosts, node_rank=hosts.index(host), is_head=host == group['head'], runs_unit=runs_unit,
                unit_hosts=unit_hosts,
                unit=unit, unit_prefix=unit_prefix, head_address=head_address, url=url,
                api_url=url + '/v1' if url else '', profile_spec=profile or {})


def _emulated(hostvars, host, order):
    """Whether `host` is an emulated node (a machine that two or more inventory hosts share: emulation())."""
    return len(_machine_nodes(hostvars, host, order)) > 1


def node_transport(groups, hostvars, host, device, order):
    """The collective transport the plan gives `host` (platforms.transport(): fabric_transport where the
    inventory pins it, socket on an emulated node, else RoCE where its platform has it); '' for a CPU
    profile: gloo over TCP has no transport rule."""
    if device == 'cpu':
        return ''
    names = [name for name, members in groups.items() if host in (members or ())]
    return _platforms.transport(_platforms.platform_of(names, _get(hostvars, host, 'llmfleet_gpu_arch'), device),
                                _get(hostvars, host, 'fabric_transport'), _emulated(hostvars, host, order))


def layout_overrides(hostvars, host):
    """What the inventory sets over the profile's layout, as the planner takes it: llmfleet_tensor_parallel_size,
    llmfleet_pipeline_parallel_size (digit strings, as -e gives them, read as numbers) and
    llmfleet_allow_tp_over_sockets."""
    out = {}
    for key in ('tensor_parallel_size', 'pipeline_parallel_size'):
        value = _get(hostvars, host, 'llmfleet_' + key)
        if value is not None:
            out[key] = int(value) if isinstance(value, str) and value.strip().isdigit() else value
    allow = (hostvars.get(host) or {}).get('llmfleet_allow_tp_over_sockets')
    if allow is not None:
        out['tp_over_sockets'] = _flag(allow)
    return out


def fabric_reach(host, ray_nodes, serving_group, hostvars):
    """Whom `host` talks to over the fabric. group: the nodes whose communication settings must agree
    with its own (its serving group when it serves, else its cluster's Ray nodes and itself); peers: every
    other node it reaches (Ray and its serving group; the fabric role pings them with a full-size frame,
    validate with small ones), in that order, and peer_ips their fabric addresses."""
    group = list(serving_group) if host in serving_group else list(dict.fromkeys(list(ray_nodes) + [host]))
    peers = [h for h in dict.fromkeys(list(ray_nodes) + list(serving_group)) if h != host]
    return {'group': group, 'peers': peers, 'peer_ips': [_get(hostvars, h, 'llmfleet_fabric_ip', '') for h in peers]}


def serve_layout(host, group, profile, groups, hostvars, order):
    """(layout, transport) of `host`'s serving group: the planner's TP x PP layout (planner.plan: sizes,
    backend, ranks) on the transport the nodes' platforms imply, and that transport: roce when every
    node has it, else socket ('' for a CPU profile). The fabric role checks on the hosts that the
    transport it detects is this one. Raises PlanError naming the host when the layout cannot be planned."""
    device = profile.get('device', 'gpu')
    nodes = [{'name': h, 'gpu_arch': _get(hostvars, h, 'llmfleet_gpu_arch'),
              'gpus_per_node': _get(hostvars, h, 'llmfleet_gpus_per_node', 1),
              'transport': node_transport(groups, hostvars, h, device, order) or 'socket'} for h in group['hosts']]
    try:
        planned = _planner.plan(profile, nodes, layout_overrides(hostvars, host))
    except PlanError as exc:
        raise PlanError('%s: %s' % (host, exc)) from exc
    if device == 'cpu':
        return planned, ''
    return planned, 'roce' if all(n['transport'] == 'roce' for n in nodes) else 'socket'


def gateway(hostvars, host, cluster, cluster_hosts, head, planned):
    """The cluster's gateway (roles/gateway): one OpenAI endpoint in front of every serving group,
    routing by model. {} where the inventory turns it off (gateway_enabled: false) or nothing is served.
    Its host: gateway_host, default the Ray head (else the cluster's first host); its workers: each
    group's API (the plan's url) under its served model name; metrics_port: where Prometheus scrapes it."""
    if not _flag(_get(hostvars, host, 'gateway_enabled', True)) or not planned:
        return {}
    where = _get(hostvars, host, 'gateway_host', '') or head or cluster_hosts[0]
    if where not in cluster_hosts:
        raise PlanError('%s: gateway_host %r is not a host of cluster %r (%s); fix: name one of them (default: '
                        'the Ray head %s) or set gateway_enabled: false'
                        % (host, where, cluster, ', '.join(cluster_hosts), head or cluster_hosts[0]))
    port = _int(_get(hostvars, host, 'gateway_port', DEFAULT_GATEWAY_PORT), host, 'gateway_port')
    taken = [g['name'] for g in planned if where in g['hosts'] and g['port'] == port]
    if taken:
        raise PlanError('%s: gateway_port %d on %s is also the API port of serving group %s there; fix: another '
                        'gateway_port (default %d) or another gateway_host'
                        % (host, port, where, taken[0], DEFAULT_GATEWAY_PORT))
    metrics = _int(_get(hostvars, host, 'gateway_metrics_port', DEFAULT_GATEWAY_METRICS_PORT), host,
                   'gateway_metrics_port')
    if metrics == port:
        raise PlanError('%s: gateway_metrics_port %d is also gateway_port; fix: two ports (defaults %d and %d)'
                        % (host, metrics, DEFAULT_GATEWAY_PORT, DEFAULT_GATEWAY_METRICS_PORT))
    address = _get(hostvars, where, 'serve_host') or _get(hostvars, where, 'llmfleet_fabric_ip')
    workers = [{'url': g['url'], 'model_id': g['served_model_name'], 'group': g['name']} for g in planned if g['url']]
    return {'host': where, 'port': port, 'metrics_port': metrics,
            'url': 'http://%s:%s' % (address, port) if address else '',
            'unit': _orphans.GATEWAY_UNIT, 'workers': workers,
            'models': sorted({w['model_id'] for w in workers}),
            'rolling': rolling(planned, head)}


def rolling(planned, head):
    """The serving groups upgrade.yml moves one at a time behind the gateway, in that order (the first
    is the canary): the replicas of a model that two or more groups serve, each drained at the gateway
    while the others answer. Left to the staged switch: a group on the Ray backend (its ranks are
    actors of the cluster's Ray, which the switch restarts) and one holding the Ray head (restarting
    the head's Ray restarts every node's)."""
    by_model = {}
    for g in planned:
        if g['url']:
            by_model.setdefault(g['served_model_name'], []).append(g)
    return [{'group': g['name'], 'hosts': list(g['hosts']), 'url': g['url'], 'model_id': model}
            for model, groups in sorted(by_model.items()) if len(groups) > 1
            for g in groups if g['backend'] != 'ray' and head not in g['hosts']]


def owned(host, hostvars, planned, ray_nodes, config_dir, emulated, cluster_hosts, gateway_host='', order=()):
    """What the plan assigns to `host`'s machine (module_utils/orphans.py owned_set): the collection's
    units, timers, nft tables and this host's files; a converge removes the rest (llmfleet.cluster.orphans).
    On an emulated node the units and tables are the machine's: every node of it in this cluster, and so
    are the image keys its authorized_keys file holds (image_copiers of each node of the machine)."""
    machine = [host] + [h for h in (emulated or {}).get('nodes') or [] if h != host and h in cluster_hosts]
    copiers = {c for h in machine for c in image_copiers(h, planned, list(order))}
    image_keys = {'file': _image_authorized_keys(hostvars, host), 'hosts': sorted(copiers)}
    nodes = [_orphans.node_assignment(h, _groups.group_of(planned, h), h in ray_nodes,
                                      _get(hostvars, h, 'serve_unit_name', '')) for h in machine]
    extra = _get(hostvars, host, 'safeguards_serve_units', []) or []
    watched = [u['name'] for u in extra if isinstance(u, dict) and isinstance(u.get('name'), str)] \
        if isinstance(extra, (list, tuple)) else []
    complete = not emulated or all(h in cluster_hosts for h in emulated.get('nodes') or [])
    return _orphans.owned_set(nodes, config_dir, _get(hostvars, host, 'ray_node_unit', _orphans.RAY_UNIT),
                              watched, complete, gateway=bool(gateway_host) and gateway_host in machine,
                              image_keys=image_keys)


def ray_num_gpus(hostvars, host):
    """The GPUs the node's Ray offers: ray_node_num_gpus where the inventory sets it, else
    llmfleet_gpus_per_node, else 1."""
    value = _get(hostvars, host, 'ray_node_num_gpus', None)
    if value is None or value == '':
        value = _get(hostvars, host, 'llmfleet_gpus_per_node', 1)
        name = 'llmfleet_gpus_per_node'
    else:
        name = 'ray_node_num_gpus'
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0 or isinstance(value, bool):
        raise PlanError('%s: %s %r is not a GPU count; set an integer, 0 or more' % (host, name, value))
    return number


def monitoring(hostvars, host, cluster_hosts, head):
    """The cluster's Prometheus: its node (monitoring_server, else the Ray head), port and the URL the
    controller and the nodes ask it at (the node's management address, ansible_host). The URL is ''
    when the node is not a host of the cluster (the monitoring role stops on that)."""
    server = _get(hostvars, host, 'monitoring_server', '') or head or ''
    port = _int(_get(hostvars, host, 'monitoring_prometheus_port', DEFAULT_PROMETHEUS_PORT), host,
                'monitoring_prometheus_port', 'a TCP port')
    address = (_get(hostvars, server, 'ansible_host', '') or server) if server in cluster_hosts else ''
    return {'server': server, 'prometheus_port': port,
            'prometheus_url': 'http://%s:%d' % (address, port) if address else ''}


def host_plan(host, groups, hostvars, serve_groups=None, profile=None, variant='', default_profile=None,
              default_variants_dir='', variant_error='', grouped=False):
    """The plan of `host` (a plain dict; the fact llmfleet_plan).

    groups: the inventory's groups; hostvars: {host: {variable: value}} holding at least INPUTS for
    every host of the inventory; serve_groups: serve_groups.plan() of the host's cluster (its URLs
    are recomputed here from serve_host / the fabric IP); profile: the resolved profile of the
    host's group; variant: its python_env variant ('' when none can be named, variant_error saying
    why); default_profile: the resolved llmfleet_serve_profile (the cluster-wide profile, e.g. whose
    required_env every Ray node gets); default_variants_dir: the collection's variants directory
    (``llmfleet_variants_dir`` overrides it), where the variant was chosen and its file lies;
    grouped: whether the inventory sets llmfleet_serve_groups for the host (it decides serving_group).
    """
    inventory = _topology.Inventory(groups, hostvars)
    cluster = inventory.cluster[host] if host in inventory.cluster else _topology.cluster_of(hostvars, host)
    order = list(groups.get('all') or [])
    cluster_hosts = inventory.cluster_hosts(cluster)
    ray_nodes = inventory.cluster_ray_nodes(cluster)
    head = inventory.ray_head(cluster)
    port = _get(hostvars, host, 'ray_node_port', DEFAULT_RAY_PORT)
    head_ip = _get(hostvars, head, 'llmfleet_fabric_ip', '') if head else ''
    addresses = {h: _get(hostvars, h, 'serve_host') or _get(hostvars, h, 'llmfleet_fabric_ip') for h in cluster_hosts}
    unit_prefix = _get(hostvars, host, 'serve_unit_prefix', _groups.UNIT_PREFIX)
    planned = [_serve(g['head'], g, None, unit_prefix, addresses) for g in serve_groups or []]
    for item in planned:
        item.pop('profile_spec')
        item.pop('node_rank')
        item.pop('is_head')
    group = _groups.group_of(serve_groups or [], host)
    gpus = _get(hostvars, host, 'llmfleet_gpus_per_node', 1)
    emulated = emulation(host, hostvars, order, int(gpus) if str(gpus).isdigit() else 1)
    if emulated and profile:
        # the engine flags the emulation adds (emulation()['engine_args']) on top of the profile's own
        extra = emulated['engine_args'].get(profile.get('engine'), {})
        profile = dict(profile, args=dict(profile.get('args') or {}, **extra))
    serve = _serve(host, group, profile, unit_prefix, addresses, _get(hostvars, host, 'serve_unit_name', ''))
    if serve and profile:
        # the layout the serve role starts (TP x PP, backend, ranks) and the transport it is planned on
        serve['layout'], serve['transport'] = serve_layout(host, serve, profile, groups, hostvars, order)
        # what the inventory set over the profile's sizes, as the planner took it (the serve role's memory fit reads it)
        serve['layout_overrides'] = layout_overrides(hostvars, host)
    serving_hosts = sorted({h for g in planned for h in g['hosts']}, key=order.index)
    # the hosts this one serves with (weights, the fabric check and the engine venv's group reach
    # them): its group of llmfleet_serve_groups (a host in none: every group's hosts); without
    # groups, the cluster's serve_nodes, else its Ray nodes
    if not grouped:
        serving_group = inventory.serving_group(cluster)
    else:
        serving_group = list(serve['hosts']) if serve else serving_hosts
    release = (serve.get('release') if serve else '') or _get(hostvars, host, 'llmfleet_release', '')
    prefix = _get(hostvars, host, 'common_prefix', DEFAULT_PREFIX)
    config_dir = _get(hostvars, host, 'common_config_dir', DEFAULT_CONFIG_DIR)
    if emulated:
        # the emulated nodes of one machine share its filesystem: each keeps its env files apart
        config_dir = '%s/nodes/%s' % (str(config_dir).rstrip('/'), host)
        check_emulated_ports(hostvars, host, [h for h in emulated['nodes'] if h in cluster_hosts] or [host], head, port)
    try:
        layout = paths(prefix, config_dir, release)
    except PlanError as exc:
        raise PlanError('%s: %s' % (host, exc)) from exc
    if serve:
        if serve.get('container'):
            holders = image_holders(serve_groups, serve['container'], image_ref(serve['container'], release), order)
            fabric = {h: _get(hostvars, h, 'llmfleet_fabric_ip', '') for h in holders}
            serve['container'] = container_plan(serve['container'], release, layout, holders, fabric,
                                                serve.get('transport', ''))
            # the file the source authorizes this node's image key in (the source's own setting)
            serve['container']['source_authorized_keys'] = _image_authorized_keys(hostvars, serve['container']['source'])
        else:
            serve['container'] = {}
        # the serve role's firewall of the engine unit, named as the owned set names it (orphans.py)
        fw = _orphans.serve_firewall(serve['unit'], layout['config_dir'], unit_prefix)
        serve['firewall'] = {'unit': fw['unit'][:-len('.service')], 'table': fw['table'][len('inet '):],
                             'file': fw['file']}
    directory = variants_dir(hostvars, host, default_variants_dir)
    gate = gateway(hostvars, host, cluster, cluster_hosts, head, planned)
    return {
        'host': host,
        'fabric_ip': _get(hostvars, host, 'llmfleet_fabric_ip', ''),
        'gpu_arch': _get(hostvars, host, 'llmfleet_gpu_arch', ''),
        # the fabric NIC's MTU: the inventory's fabric_mtu, else jumbo frames; the transport the
        # inventory asks for (fabric_transport: auto, roce or socket; the fabric role detects the one it gets)
        'fabric': dict(fabric_reach(host, ray_nodes, serving_group, hostvars),
                       mtu=_int(_get(hostvars, host, 'fabric_mtu', DEFAULT_FABRIC_MTU), host, 'fabric_mtu', 'an MTU'),
                       transport=_get(hostvars, host, 'fabric_transport', '') or DEFAULT_FABRIC_TRANSPORT,
                       # the names the node's comm.env can hold (vLLM must not copy them to other nodes' Ray workers)
                       env_names=_comm_env.env_names(emulated.get('env'), _get(hostvars, host, 'fabric_env_overrides'),
                                                     _get(hostvars, host, 'fabric_host_env_overrides'))),
        'cluster': {
            'name': cluster,
            'hosts': cluster_hosts,
            'ray_nodes': ray_nodes,
            'ray_head': head or '',
            'ray_head_address': head_ip,
            'ray_port': port,
            'ray_address': '%s:%s' % (head_ip, port) if head_ip else '',
            'serve_groups': planned,
            'serving_hosts': serving_hosts,
            # one OpenAI endpoint in front of the serving groups ({} when off)
            'gateway': gate,
        },
        'serving_group': serving_group,
        'serve': serve,
        'profile_spec': default_profile or {},
        'variant': variant or '',
        'variant_error': '' if variant else variant_error or '',
        'variants_dir': directory,
        'variant_file': '%s/%s.yml' % (directory, variant) if variant and directory else '',
        'release': release,
        'service': {key: _get(hostvars, host, 'common_service_' + key, value) for key, value in DEFAULT_SERVICE.items()},
        'firewall': _flag(_get(hostvars, host, 'ray_node_firewall', True)),
        'ray_auth': ray_auth(_get(hostvars, host, 'ray_node_auth', 'token'), layout['config_dir'], host),
        'paths': layout,
        'env_files': env_files(layout['config_dir'], serve.get('unit', '')),
        'ray_ports': ray_ports(hostvars, host, emulated.get('index', 0)),
        'ray_num_gpus': ray_num_gpus(hostvars, host),
        'ray_temp_dir': _get(hostvars, host, 'ray_node_temp_dir', '') or DEFAULT_RAY_TEMP_DIR,
        'ray_audit_vars_regex': _get(hostvars, host, 'ray_node_audit_vars_regex', '') or DEFAULT_RAY_AUDIT_VARS_REGEX,
        'monitoring': monitoring(hostvars, host, cluster_hosts, head),
        # the Ray resource that names this node's serving group: a Ray-backend layout's ranks can be
        # placed on its group's nodes only (arch_<arch> alone let a rank land on another group's
        # Spark once a cluster had more Sparks than the layout has ranks)
        'ray_resources': {ray_group_resource(group['name']): 1} if group else {},
        # the unit names the roles install on the node (validate asks systemd about them)
        'units': {'ray': _get(hostvars, host, 'ray_node_unit', _orphans.RAY_UNIT), 'serve_prefix': unit_prefix},
        'emulation': emulated,
        'owned': owned(host, hostvars, planned, ray_nodes, layout['config_dir'], emulated, cluster_hosts,
                       gate.get('host', ''), order),
    }
