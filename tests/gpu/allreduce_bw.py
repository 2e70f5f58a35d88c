# Copyright: llmfleet maintainers
# Apache License 2.0 (see galaxy.yml)
"""All-reduce bus bandwidth across the GPUs of one host, through whichever libnccl the process
loads (stock: the nvidia-nccl wheel torch links; built: put the build in LD_PRELOAD, as the nccl
role's nccl.env does). One process per GPU (torch.distributed, NCCL backend), float32 sum.

  allreduce_bw.py [--sizes-mib 8,64,256,1024] [--iters 20] [--label stock] [--out result.json]
                  [--node-env-files A/comm.env,B/comm.env,...]

--node-env-files: one rank per file, each with that file's environment (an emulated node's comm.env
of inventories/gpu-4node: its GPU, NCCL host identity and socket settings), so the all-reduce runs
across emulated nodes over NCCL's socket transport as it would across the lab's nodes.

busbw = algbw * 2 (n-1) / n (nccl-tests' definition); the bound library is the one global symbol
lookup finds for ncclGetVersion (dladdr names its file); every mapped libnccl is listed too. Keep NCCL_NVLS_ENABLE=0 set (multicast off).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time


def loaded_nccl():
    """(bound path, bound version, every libnccl mapped). The bound one is what the process's
    global symbol lookup finds for ncclGetVersion (an LD_PRELOADed build comes first), not
    merely the first file in /proc/self/maps: with LD_PRELOAD both are mapped."""
    mapped = []
    for line in open('/proc/self/maps'):
        parts = line.split()
        if len(parts) >= 6 and os.path.basename(parts[5]).startswith('libnccl.so') and parts[5] not in mapped:
            mapped.append(parts[5])
    path = version = None
    try:
        fn = ctypes.CDLL(None).ncclGetVersion
        v = ctypes.c_int()
        fn(ctypes.byref(v))
        code = v.value
        version = '%d.%d.%d' % (code // 10000, (code % 10000) // 100, code % 100)
        info = _Dlinfo()
        if _dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)):
            path = info.dli_fname.decode()
    except (OSError, AttributeError):
        pass
    return path, version, mapped


class _Dlinfo(ctypes.Structure):
    _fields_ = [('dli_fname', ctypes.c_char_p), ('dli_fbase', ctypes.c_void_p),
                ('dli_sname', ctypes.c_char_p), ('dli_saddr', ctypes.c_void_p)]


_dladdr = ctypes.CDLL(None).dladdr
_dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Dlinfo)]
_dladdr.restype = ctypes.c_int


def read_env_file(path):
    """KEY=value lines of a systemd EnvironmentFile (comments and blank lines skipped, quotes removed)."""
    env = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith('#') and '=' in line:
            key, value = line.split('=', 1)
            env[key.strip()] = value.strip().strip('"\'')
    return env


def worker(rank, world, a, q):
    files = [f for f in a.node_env_files.split(',') if f]
    if files:
        # before torch: CUDA_VISIBLE_DEVICES and the NCCL variables of this rank's node
        os.environ.update(read_env_file(files[rank]))
    import torch
    import torch.distributed as dist
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    os.environ.setdefault('MASTER_PORT', str(a.port))
    device = 0 if files else rank
    torch.cuda.set_device(device)
    dist.init_process_group('nccl', rank=rank, world_size=world, device_id=torch.device('cuda', device))
    rows = []
    for mib in [int(s) for s in a.sizes_mib.split(',')]:
        n = mib * 1024 * 1024 // 4
        x = torch.ones(n, dtype=torch.float32, device='cuda')
        for _warm in range(a.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        x.fill_(1.0)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        correct = bool(x[0].item() == world and x[-1].item() == world)
        dist.barrier()
        t0 = time.perf_counter()
        for _iter in range(a.iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / a.iters
        algbw = n * 4 / dt / 1e9
        rows.append({'size_mib': mib, 'time_us': round(dt * 1e6, 1), 'algbw_gbps': round(algbw, 1),
                     'busbw_gbps': round(algbw * 2 * (world - 1) / world, 1), 'correct': correct})
    path, version, mapped = loaded_nccl()
    if rank == 0:
        q.put({'label': a.label, 'world': world, 'nccl_path': path, 'nccl_version': version, 'nccl_mapped': mapped,
               'torch_nccl_version': '.'.join(map(str, torch.cuda.nccl.version())),
               'gpu': torch.cuda.get_device_name(0), 'rows': rows,
               'env': {k: os.environ.get(k) for k in ('NCCL_NVLS_ENABLE', 'LD_PRELOAD', 'NCCL_ALGO', 'NCCL_PROTO',
                                                      'NCCL_SOCKET_IFNAME', 'NCCL_P2P_DISABLE', 'NCCL_SHM_DISABLE',
                                                      'NCCL_HOSTID', 'CUDA_VISIBLE_DEVICES')}})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--sizes-mib', default='8,64,256,1024')
    ap.add_argument('--iters', type=int, default=20)
    ap.add_argument('--warmup', type=int, default=5)
    ap.add_argument('--label', default='stock')
    ap.add_argument('--port', type=int, default=29533)
    ap.add_argument('--out', default='')
    ap.add_argument('--node-env-files', default='', help='one env file per rank (emulated nodes)')
    a = ap.parse_args()
    if os.environ.get('NCCL_NVLS_ENABLE') != '0':
        raise SystemExit('refusing to run with NVLink multicast possibly on: export NCCL_NVLS_ENABLE=0')
    import torch
    import torch.multiprocessing as mp
    world = len([f for f in a.node_env_files.split(',') if f]) or torch.cuda.device_count()
    ctx = mp.get_context('spawn')
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, a, q)) for r in range(world)]
    for p in procs:
        p.start()
    result = q.get(timeout=600)
    for p in procs:
        p.join(120)
    print(json.dumps(result))
    if a.out:
        with open(a.out, 'w') as f:
            json.dump(result, f, indent=1)
    return 0 if all(r['correct'] for r in result['rows']) else 1


if __name__ == '__main__':
    sys.exit(main())
