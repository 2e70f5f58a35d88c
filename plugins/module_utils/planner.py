# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Parallelism planner: fill in and check tensor/pipeline parallel sizes for a serving group.

Pure Python, no I/O. Rules (docs/notes: TP needs a fast fabric, PP is fine over Ethernet):
  * TP within a node: up to that node's GPUs.
  * TP across nodes: only when every node of the group talks RoCE and all share one GPU arch
    (NCCL cannot mix transports: "wrong type 3 != 4"; kernels differ across archs).
  * PP across nodes: always allowed (sockets, mixed archs).
  * TP x PP must equal the group's GPU count.
CPU profiles (device: cpu, the sim) run gloo over TCP, so the transport rule does not apply.
"""

TRANSPORTS = ("roce", "socket")


class PlanError(ValueError):
    """The inventory cannot be planned (the profile's parallelism does not fit the serving group, a path
    or directory is no path); the message names what and how to fix it."""


def _host_view(hosts):
    out = []
    problems = []
    for i, host in enumerate(hosts or []):
        if not isinstance(host, dict):
            problems.append(f"hosts[{i}]: expected a mapping with name, gpu_arch, gpus_per_node, transport")
            continue
        name = host.get("name") or f"hosts[{i}]"
        gpus = host.get("gpus_per_node", 1)
        if gpus is None:
            gpus = 1
        if isinstance(gpus, str) and gpus.isdigit():
            gpus = int(gpus)
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
            problems.append(f"{name}: gpus_per_node must be a positive integer, got {gpus!r}")
            gpus = 1
        transport = host.get("transport", "socket") or "socket"
        if transport not in TRANSPORTS:
            problems.append(f"{name}: transport '{transport}' is not one of {', '.join(TRANSPORTS)}")
        out.append({"name": name, "gpu_arch": host.get("gpu_arch"), "gpus_per_node": gpus,
                    "transport": transport})
    if not out and not problems:
        problems.append("the serving group is empty")
    if problems:
        raise PlanError("; ".join(problems))
    return out


def plan(profile, hosts, overrides=None, model_config=None):
    """Return the parallel layout of `profile` on `hosts` (rank 0 first), or raise PlanError.

    hosts: [{name, gpu_arch, gpus_per_node (default 1), transport: roce|socket}, ...]
    overrides: tensor_parallel_size / pipeline_parallel_size / backend taking precedence over
      the profile (e.g. llmfleet_tensor_parallel_size from the inventory).
    model_config: optional HF config.json dict; TP must divide the attention heads and PP must
      not exceed the layer count.
    Result: tensor_parallel_size, pipeline_parallel_size, backend, nnodes, gpus_per_node,
      total_gpus, cross_node_tp, head, ranks [{host, node_rank}], notes.
    """
    overrides = overrides or {}
    name = profile.get("name", "?")
    nodes = _host_view(hosts)
    gpn = nodes[0]["gpus_per_node"]
    if any(n["gpus_per_node"] != gpn for n in nodes):
        counts = ", ".join(f"{n['name']}={n['gpus_per_node']}" for n in nodes)
        raise PlanError(f"profile '{name}': every node must have the same GPU count ({counts}); "
                        "narrow the serving group with serve_nodes")
    nnodes = len(nodes)
    total = gpn * nnodes
    cpu = profile.get("device") == "cpu"
    archs = sorted({str(n["gpu_arch"]) for n in nodes})
    transports = sorted({n["transport"] for n in nodes})
    fast_fabric = cpu or (transports == ["roce"] and len(archs) == 1)
    why_slow = []
    if not cpu:
        if transports != ["roce"]:
            socket_nodes = [n["name"] for n in nodes if n["transport"] != "roce"]
            why_slow.append(f"{', '.join(socket_nodes)} talk(s) NCCL over sockets")
        if len(archs) > 1:
            why_slow.append(f"the group mixes GPU archs ({', '.join(archs)})")

    tp = overrides.get("tensor_parallel_size") or profile.get("tensor_parallel_size")
    pp = overrides.get("pipeline_parallel_size") or profile.get("pipeline_parallel_size")
    backend = overrides.get("backend") or profile.get("backend")
    notes = []
    if tp is None and pp is None:
        tp = total if fast_fabric else gpn
        pp = total // tp
        notes.append(f"filled in TP={tp} PP={pp}: " + (
            "TP across nodes over RoCE" if fast_fabric and nnodes > 1 and not cpu else
            "TP within each node, PP across nodes" if nnodes > 1 else "one node"))
    elif tp is None or pp is None:
        # one of the two given: the other is what the group's GPUs leave
        given, key, known, other = (pp, "pipeline", "PP", "TP") if tp is None else (tp, "tensor", "TP", "PP")
        if total % given:
            raise PlanError(f"profile '{name}': {key}_parallel_size {given} does not divide the "
                            f"group's {total} GPUs ({nnodes} nodes x {gpn}); {_fix(total, gpn, nnodes, fast_fabric)}")
        filled = total // given
        tp, pp = (filled, pp) if tp is None else (tp, filled)
        notes.append(f"filled in {other}={filled} from {known}={given} and {total} GPUs")

    if tp * pp != total:
        narrow = ""
        if (tp * pp) % gpn == 0 and tp * pp < total:
            n = tp * pp // gpn
            narrow = f", or narrow the serving group (serve_nodes) to {n} node{'s' if n != 1 else ''}"
        raise PlanError(f"profile '{name}': TP x PP = {tp} x {pp} = {tp * pp} but the serving group has "
                        f"{total} GPUs ({nnodes} nodes x {gpn}); {_fix(total, gpn, nnodes, fast_fabric)}{narrow}")
    cross_node_tp = tp > gpn
    if cross_node_tp:
        if tp % gpn:
            raise PlanError(f"profile '{name}': TP={tp} does not split evenly over nodes of {gpn} GPUs")
        if not fast_fabric and overrides.get("tp_over_sockets"):
            # the inventory asked for it (llmfleet_allow_tp_over_sockets): a layout test on nodes
            # without RoCE, e.g. the two-Spark TP 2 layout on emulated nodes (inventories/gpu-4node)
            notes.append(f"TP={tp} across nodes although {' and '.join(why_slow)}: every layer's all-reduce "
                         "crosses the network (llmfleet_allow_tp_over_sockets)")
        elif not fast_fabric:
            raise PlanError(f"profile '{name}': TP={tp} spans nodes but {' and '.join(why_slow)}; "
                            f"TP across nodes needs RoCE on every node and one GPU arch. "
                            f"Use tensor_parallel_size: {gpn}, pipeline_parallel_size: {nnodes}")
    if model_config:
        _check_model(name, model_config, tp, pp)
    if nnodes > 1 and backend == "mp" and profile.get("engine") == "vllm":
        notes.append("vLLM native multi-node (mp backend) needs vLLM >= 0.12")
    return {
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "backend": backend,
        "nnodes": nnodes,
        "gpus_per_node": gpn,
        "total_gpus": total,
        "cross_node_tp": cross_node_tp,
        "head": nodes[0]["name"],
        "ranks": [{"host": n["name"], "node_rank": i} for i, n in enumerate(nodes)],
        "notes": notes,
    }


def _fix(total, gpn, nnodes, fast_fabric):
    if nnodes == 1:
        return f"set tensor_parallel_size: {total}, pipeline_parallel_size: 1"
    if fast_fabric:
        return (f"set tensor_parallel_size: {total}, pipeline_parallel_size: 1 (RoCE) or "
                f"tensor_parallel_size: {gpn}, pipeline_parallel_size: {nnodes}")
    return f"set tensor_parallel_size: {gpn}, pipeline_parallel_size: {nnodes}"


def _check_model(name, config, tp, pp):
    text = config.get("text_config") or config
    heads = text.get("num_attention_heads")
    layers = text.get("num_hidden_layers")
    if heads and heads % tp:
        raise PlanError(f"profile '{name}': TP={tp} does not divide the model's {heads} attention heads")
    if layers and pp > layers:
        raise PlanError(f"profile '{name}': PP={pp} exceeds the model's {layers} layers")
