# Copyright: llmfleet maintainers
# Apache License 2.0 (see galaxy.yml)
"""Checks of a served engine on the GPU host (what validate.yml checks on a fleet).

  validate_gpu.py wait   --url URL --model NAME --since EPOCH --timeout S --pidfile PID   -> healthy_after
  validate_gpu.py ray    --python VENV_PY --address IP:PORT --gpus N [--run-as USER] --audit K=V,...
  validate_gpu.py serve  --url URL --model NAME [--audit-pids PIDFILE] --audit K=V,...

Each prints one JSON line and exits non-zero when a check fails. `ray` runs the collection's own
probe (plugins/module_utils/ray_state.py PROBE, as llmfleet.cluster.ray_cluster_info does) in the
release interpreter: nodes, GPUs, and the audited variables inside a Ray worker. `serve` checks
/health, /v1/models, a completion (exact token count with ignore_eos), a streamed chat completion,
and the audited variables in the environ of the engine's processes (the API process and its
children, Ray's worker processes included).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def load_ray_state():
    spec = importlib.util.spec_from_file_location(
        'ray_state', os.path.join(REPO, 'plugins', 'module_utils', 'ray_state.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def http(url, body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.getcode(), r.read().decode('utf-8', 'replace')


def parse_audit(text):
    return dict(item.split('=', 1) for item in text.split(',') if item)


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def cmd_wait(a):
    """The llm_server module's readiness rule: /health 200 and /v1/models lists the name."""
    pid = int(open(a.pidfile).read()) if a.pidfile else None
    deadline = a.since + a.timeout
    while time.time() < deadline:
        try:
            code, _body = http(a.url + '/health', timeout=5)
            if code == 200:
                ids = [m['id'] for m in json.loads(http(a.url + '/v1/models', timeout=5)[1])['data']]
                if a.model in ids:
                    out = {'healthy': True, 'healthy_after': round(time.time() - a.since, 1), 'models': ids}
                    print(json.dumps(out))
                    return 0
        except Exception:  # noqa: BLE001 - not up yet
            pass
        if pid and not alive(pid):
            print(json.dumps({'healthy': False, 'error': 'engine process %d died while loading' % pid}))
            return 1
        time.sleep(1)
    print(json.dumps({'healthy': False, 'error': 'not ready within %ss' % a.timeout}))
    return 1


def cmd_ray(a):
    rs = load_ray_state()
    expected = parse_audit(a.audit)
    args = {'address': a.address, 'timeout': a.timeout, 'wait_for_nodes': 1, 'wait_for_gpus': a.gpus,
            'expected_ips': [a.address.split(':')[0]], 'audit_vars': sorted(expected)}
    cmd = [a.python, '-c', rs.PROBE, json.dumps(args)]
    if a.run_as:
        cmd = ['runuser', '-u', a.run_as, '--'] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, cwd='/', check=False)
    if p.returncode != 0:
        print(json.dumps({'ok': False, 'error': p.stderr[-1500:]}))
        return 1
    state = rs.parse_probe_output(p.stdout)
    nodes = rs.summarize(state['nodes'])
    gpus = sum(n['gpus'] for n in nodes)
    ip = a.address.split(':')[0]
    drift = rs.env_drift({ip: expected}, state.get('env'), None) if expected else []
    ok = gpus == a.gpus and not drift
    print(json.dumps({'ok': ok, 'nodes': nodes, 'gpus': gpus, 'env': state.get('env'), 'env_drift': drift}))
    return 0 if ok else 1


def proc_tree(root):
    kids = {}
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                ppid = int(open('/proc/%s/stat' % d).read().rsplit(')', 1)[1].split()[1])
            except (IOError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def environ(pid):
    try:
        raw = open('/proc/%d/environ' % pid, 'rb').read().split(b'\0')
        cmd = open('/proc/%d/cmdline' % pid, 'rb').read().replace(b'\0', b' ').decode()[:120]
    except IOError:
        return None, ''
    return dict(x.decode('utf-8', 'replace').split('=', 1) for x in raw if b'=' in x), cmd


def nccl_maps(pids):
    """Which libnccl files the engine's processes (and Ray's workers) have mapped."""
    found = set()
    for pid in pids:
        try:
            for line in open('/proc/%d/maps' % pid):
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[5]).startswith('libnccl'):
                    found.add(parts[5])
        except IOError:
            continue
    return found


def cmd_serve(a):
    expected = parse_audit(a.audit)
    res = {'checks': {}}
    checks = res['checks']
    code, _body = http(a.url + '/health')
    checks['health'] = code == 200
    ids = [m['id'] for m in json.loads(http(a.url + '/v1/models')[1])['data']]
    checks['models'] = a.model in ids
    t0 = time.time()
    doc = json.loads(http(a.url + '/v1/completions', {
        'model': a.model, 'prompt': 'The quick brown fox', 'max_tokens': 16, 'temperature': 0,
        'ignore_eos': True}, timeout=120)[1])
    res['completion'] = {'tokens': doc['usage']['completion_tokens'], 'latency_s': round(time.time() - t0, 3),
                         'text': doc['choices'][0]['text'][:80]}
    checks['completion'] = doc['usage']['completion_tokens'] == 16
    req = urllib.request.Request(a.url + '/v1/chat/completions', data=json.dumps({
        'model': a.model, 'messages': [{'role': 'user', 'content': 'Say hello.'}], 'max_tokens': 12,
        'temperature': 0, 'ignore_eos': True, 'stream': True}).encode(),
        headers={'Content-Type': 'application/json'})
    chunks, done, t0, first = 0, False, time.time(), None
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.decode().strip()
            if line == 'data: [DONE]':
                done = True
            elif line.startswith('data: '):
                chunk = json.loads(line[6:])
                if chunk['choices'] and chunk['choices'][0].get('delta', {}).get('content'):
                    chunks += 1
                    first = first or time.time() - t0
    res['stream'] = {'content_chunks': chunks, 'done': done, 'first_chunk_s': round(first or 0, 3)}
    checks['stream'] = done and chunks >= 2
    if a.audit_pids:
        root = int(open(a.audit_pids).read())
        seen, bad, skipped = 0, [], []
        for pid in proc_tree(root) + ([int(p) for p in a.extra_pids.split(',') if p] if a.extra_pids else []):
            env, cmd = environ(pid)
            if env is None:
                continue
            if a.audit_skip and re.match(a.audit_skip, cmd):
                skipped.append(cmd.strip())
                continue
            seen += 1
            for k, v in expected.items():
                if env.get(k) != v:
                    bad.append({'pid': pid, 'cmd': cmd, 'var': k, 'actual': env.get(k)})
        res['env_audit'] = {'processes': seen, 'drift': bad[:20], 'skipped': sorted(set(skipped))}
        res['libnccl_mapped'] = sorted(nccl_maps(proc_tree(root) + (
            [int(p) for p in a.extra_pids.split(',') if p] if a.extra_pids else [])))
        checks['env_audit'] = seen > 0 and not bad
    res['ok'] = all(checks.values())
    print(json.dumps(res))
    return 0 if res['ok'] else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    w = sub.add_parser('wait')
    w.add_argument('--url', required=True)
    w.add_argument('--model', required=True)
    w.add_argument('--since', type=float, required=True)
    w.add_argument('--timeout', type=float, default=600)
    w.add_argument('--pidfile', default='')
    r = sub.add_parser('ray')
    r.add_argument('--python', required=True)
    r.add_argument('--address', required=True)
    r.add_argument('--gpus', type=int, required=True)
    r.add_argument('--run-as', default='')
    r.add_argument('--audit', default='')
    r.add_argument('--timeout', type=float, default=60)
    s = sub.add_parser('serve')
    s.add_argument('--url', required=True)
    s.add_argument('--model', required=True)
    s.add_argument('--audit', default='')
    s.add_argument('--audit-pids', default='')
    s.add_argument('--extra-pids', default='')
    # Ray's own agents are started by the raylet with a reduced environment (seen on the 2x H200
    # host: no NCCL_NVLS_ENABLE / NVSHMEM_DISABLE_NVLS in ray::DashboardAgent and
    # ray::RuntimeEnvAgent); they run no engine code, so the audit covers the rest.
    s.add_argument('--audit-skip', default=r'ray::(DashboardAgent|RuntimeEnvAgent)\b')
    a = ap.parse_args()
    return {'wait': cmd_wait, 'ray': cmd_ray, 'serve': cmd_serve}[a.cmd](a)


if __name__ == '__main__':
    sys.exit(main())
