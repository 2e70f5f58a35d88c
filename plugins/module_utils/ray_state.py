# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ray cluster state: summarise ``ray.nodes()``, find missing hosts, audit worker env. Pure.

The probe script (``PROBE``) runs inside the release venv on the head, as the service user, and
prints one JSON document; everything that interprets it lives here so it unit-tests from real
output without a cluster.
"""

PROBE = r'''
import json, os, sys, time
args = json.loads(sys.argv[1])
import ray
ray.init(address=args["address"], logging_level="ERROR", log_to_driver=False)
deadline = time.time() + args["timeout"]
while True:
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    ips = {n.get("NodeManagerAddress") for n in nodes}
    gpus = sum(n.get("Resources", {}).get("GPU", 0) for n in nodes)
    done = (len(nodes) >= args["wait_for_nodes"] and gpus >= args["wait_for_gpus"]
            and set(args["expected_ips"]) <= ips)
    if done or time.time() >= deadline:
        break
    time.sleep(2)
out = {"nodes": [{"ip": n.get("NodeManagerAddress"), "node_id": n.get("NodeID"),
                  "hostname": n.get("NodeManagerHostname"), "alive": n.get("Alive"),
                  "resources": n.get("Resources", {})} for n in ray.nodes()]}
if args["audit_vars"]:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    def env_of(names):
        import socket
        return {"pid": os.getpid(), "env": {k: os.environ.get(k) for k in names}}

    refs = {n["ip"]: env_of.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["node_id"], soft=False)).remote(args["audit_vars"]) for n in out["nodes"] if n["alive"]}
    out["env"] = {ip: ray.get(ref, timeout=60)["env"] for ip, ref in refs.items()}
ray.shutdown()
print("LLMFLEET_RAY_STATE " + json.dumps(out))
'''


def parse_probe_output(stdout):
    """The JSON document the probe printed (its line is prefixed so Ray's own noise is ignored)."""
    import json
    for line in reversed((stdout or '').splitlines()):
        if line.startswith('LLMFLEET_RAY_STATE '):
            return json.loads(line[len('LLMFLEET_RAY_STATE '):])
    raise ValueError('the Ray probe printed no state line')


def summarize(nodes):
    """Alive nodes sorted by IP with their resources split into CPU/GPU/memory/custom."""
    alive = [n for n in nodes if n.get('alive')]
    out = []
    for n in sorted(alive, key=lambda n: tuple(int(p) if p.isdigit() else 0 for p in str(n.get('ip', '')).split('.'))):
        res = dict(n.get('resources') or {})
        custom = {k: v for k, v in res.items()
                  if k not in ('CPU', 'GPU', 'memory', 'object_store_memory')
                  and not k.startswith('node:') and k != 'accelerator_type'}
        out.append({
            'ip': n.get('ip'), 'hostname': n.get('hostname'), 'node_id': n.get('node_id'),
            'cpus': res.get('CPU', 0), 'gpus': res.get('GPU', 0),
            'memory_bytes': int(res.get('memory', 0)),
            'object_store_bytes': int(res.get('object_store_memory', 0)),
            'custom': custom,
        })
    return out


def missing_hosts(expected, nodes):
    """Hosts of ``expected`` ({host: fabric_ip}) with no alive node at that IP, sorted."""
    ips = {n['ip'] for n in nodes}
    return sorted(h for h, ip in (expected or {}).items() if ip not in ips)


def unexpected_ips(expected, nodes):
    """Alive node IPs that belong to no expected host (e.g. a node registered its LAN address)."""
    want = set((expected or {}).values())
    return sorted(n['ip'] for n in nodes if n['ip'] not in want) if expected else []


def env_drift(expected_env, actual_env, ip_to_host=None):
    """Per-host drift between the env a worker process has and what its host should have.

    ``expected_env``: {ip: {VAR: value}}; ``actual_env``: {ip: {VAR: value or None}}.
    Returns a list of ``{host, ip, var, expected, actual}`` sorted by host then var.
    """
    names = ip_to_host or {}
    out = []
    for ip, want in sorted((expected_env or {}).items()):
        have = (actual_env or {}).get(ip)
        host = names.get(ip, ip)
        if have is None:
            out.append({'host': host, 'ip': ip, 'var': '*', 'expected': 'a Ray worker on this node', 'actual': None})
            continue
        for var, value in sorted(want.items()):
            if have.get(var) != value:
                out.append({'host': host, 'ip': ip, 'var': var, 'expected': value, 'actual': have.get(var)})
    return out
