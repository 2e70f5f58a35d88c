# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A real all-reduce across the serving nodes: the probe script, its output, bandwidth. Pure.

``PROBE`` runs on every rank at once (the engine venv's Python, as the service user, with the
engine's env files loaded): ``torch.distributed`` with NCCL on GPU nodes (``NCCL_DEBUG=INFO`` so the
transport can be read back, see ``nccl_debug``) or gloo over the fabric NIC on CPU nodes, rendezvous
at the serving head's fabric IP. It prints one JSON line; everything that interprets it is here.

Bandwidth follows nccl-tests: ``algbw = bytes / time``; ``busbw = algbw * 2 (n - 1) / n`` for
all-reduce, the number comparable across group sizes and with the link speed.
"""

import json

MARK = 'LLMFLEET_COLLECTIVE '

PROBE = r'''
import datetime, json, os, socket, sys, time
args = json.loads(sys.argv[1])
backend = args["backend"]
import torch
import torch.distributed as dist
if backend == "auto":
    backend = "nccl" if torch.cuda.is_available() else "gloo"
if backend == "nccl":
    os.environ.setdefault("NCCL_DEBUG", "INFO")
    os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
out = {"backend": backend, "rank": args["rank"], "world_size": args["world_size"], "host": socket.gethostname(),
       "torch": torch.__version__, "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
       "nccl_ifname": os.environ.get("NCCL_SOCKET_IFNAME"), "nccl_ib_disable": os.environ.get("NCCL_IB_DISABLE")}
t0 = time.time()
try:
    dist.init_process_group(backend, init_method="tcp://%s:%d" % (args["master_addr"], args["master_port"]),
                            rank=args["rank"], world_size=args["world_size"],
                            timeout=datetime.timedelta(seconds=args["timeout"]))
    out["init_s"] = time.time() - t0
    device = "cpu"
    if backend == "nccl":
        device = "cuda:%d" % (args.get("local_device") or 0)
        torch.cuda.set_device(device)
    numel = max(1, int(args["size_bytes"]) // 4)
    x = torch.full((numel,), float(args["rank"] + 1), dtype=torch.float32, device=device)
    def sync():
        if backend == "nccl":
            torch.cuda.synchronize()
    for _ in range(int(args["warmup"])):
        dist.all_reduce(x)
    sync()
    dist.barrier()
    times = []
    for _ in range(int(args["iters"])):
        x.fill_(float(args["rank"] + 1))
        sync()
        t = time.perf_counter()
        dist.all_reduce(x)
        sync()
        times.append(time.perf_counter() - t)
    want = args["world_size"] * (args["world_size"] + 1) / 2.0
    got = float(x[0].item()), float(x[-1].item())
    out.update(times=times, size_bytes=numel * 4, correct=all(abs(v - want) < 1e-3 for v in got),
               value=got[0], want=want)
    dist.barrier()
    dist.destroy_process_group()
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, str(exc)[-1500:])
sys.stdout.flush()
print("LLMFLEET_COLLECTIVE " + json.dumps(out), flush=True)
'''


def probe_args(rank, world_size, master_addr, master_port, size_bytes, iters=5, warmup=2, timeout=90,
               backend='auto', local_device=0):
    """The JSON argument of ``PROBE``."""
    if backend not in ('auto', 'nccl', 'gloo'):
        raise ValueError('backend must be auto, nccl or gloo, got %r' % (backend,))
    if not 0 <= int(rank) < int(world_size):
        raise ValueError('rank %s outside a group of %s' % (rank, world_size))
    return {'rank': int(rank), 'world_size': int(world_size), 'master_addr': str(master_addr),
            'master_port': int(master_port), 'size_bytes': int(size_bytes), 'iters': int(iters),
            'warmup': int(warmup), 'timeout': int(timeout), 'backend': backend, 'local_device': int(local_device)}


def parse_output(stdout):
    """The probe's JSON line (NCCL and torch print their own lines around it)."""
    for line in reversed((stdout or '').splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise ValueError('the collective probe printed no result line')


def median(values):
    vals = sorted(float(v) for v in values)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2.0


def bandwidth(size_bytes, seconds, world_size):
    """``{algbw_gbps, busbw_gbps}`` in Gbit/s for one all-reduce of ``size_bytes`` taking ``seconds``."""
    if not seconds or seconds <= 0 or int(world_size) < 1:
        return {'algbw_gbps': 0.0, 'busbw_gbps': 0.0}
    n = int(world_size)
    alg = float(size_bytes) * 8 / float(seconds) / 1e9
    bus = alg * (2.0 * (n - 1) / n) if n > 1 else alg
    return {'algbw_gbps': round(alg, 3), 'busbw_gbps': round(bus, 3)}


def result(doc):
    """Probe document -> module result: backend, timing, bandwidth (median time), correctness."""
    out = {'backend': doc.get('backend'), 'rank': doc.get('rank'), 'world_size': doc.get('world_size'),
           'error': doc.get('error', ''), 'correct': bool(doc.get('correct')), 'size_bytes': doc.get('size_bytes', 0),
           'times_s': [round(t, 6) for t in doc.get('times') or []], 'init_s': round(doc.get('init_s') or 0.0, 3),
           'torch': doc.get('torch'), 'gloo_ifname': doc.get('gloo_ifname'), 'nccl_ifname': doc.get('nccl_ifname')}
    t = median(doc.get('times') or [])
    out['time_s'] = round(t, 6) if t is not None else None
    out.update(bandwidth(out['size_bytes'], t, doc.get('world_size') or 1))
    return out
