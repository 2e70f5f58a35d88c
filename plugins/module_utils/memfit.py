# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Memory fit: will a model, split TP x PP, fit the nodes with room left for the OS?

Pure Python, no I/O. Built for unified-memory nodes (DGX Spark, Jetson Thor: the OS, Ray and the
engine share one pool of ~121.7 GiB): the engine takes `gpu_memory_utilization` of the node, the
host keeps the rest, and the host must keep a floor free or the node stops answering ssh (004
notes: gpt-oss-120b starved a Spark until only ICMP answered).

Model dimensions come from a Hugging Face config.json (flat, or nested under text_config) or from a
profile's model_facts. Only attention layers grow with context: Mamba-2 (Nemotron-H
hybrid_override_pattern 'M') and Gated DeltaNet (Qwen3.5/Qwen3-Next 'linear_attention') layers keep
a fixed state per sequence; sliding-window layers stop growing at the window.

All sizes in GiB (2**30 bytes).
"""
import math
import re

from ansible_collections.llmfleet.cluster.plugins.module_utils import profiles as _profiles

GIB = float(1 << 30)
DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2,
    "half": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "int8": 1,
    "nvfp4": 0.5625, "fp4_e2m1": 0.5625,
}
# Defaults, each a knob of estimate():
HOST_RESERVED_GIB = 12.0   # OS + Ray + engine processes outside the engine's pool. Calibrated on the
#                            004 snapshot: 121.7 GiB node at 0.75 -> 18.2 GiB available.
HOST_FLOOR_GIB = 6.0       # refuse below (004's warning floor on MemAvailable)
HOST_WARN_GIB = 10.0       # warn below
ACTIVATION_GIB = 2.0       # per rank, inside the pool: activations, sampler, CUDA graphs
KV_MARGIN = 1.10           # warn when the pool holds the requested KV with less than 10 % to spare


class MemFitError(ValueError):
    """Not enough information to estimate (no config and no model_facts for a needed value)."""


_DECIMAL = {"k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}
_BINARY = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_human_int(value):
    """Bytes from vLLM's human-readable integers (--kv-cache-memory-bytes): '1k' = 1000,
    '1K' = 1024, '1.5g' = 1.5e9, '64M' = 64 MiB, a plain number = bytes."""
    if isinstance(value, bool) or value is None:
        raise MemFitError(f"expected a byte count, got {value!r}")
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip()
    match = re.match(r"^(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)(?:i?[bB])?$", text)
    if not match:
        raise MemFitError(f"'{value}' is not a byte count (examples: 68719476736, 64M, 1.5g)")
    number, suffix = match.groups()
    if suffix in _BINARY:
        if "." in number:
            raise MemFitError(f"'{value}': binary multipliers (K, M, G, T) take whole numbers (vLLM's rule)")
        return int(number) * _BINARY[suffix]
    return int(float(number) * _DECIMAL.get(suffix, 1))


def dtype_bytes(name, default=2):
    if name is None or name == "auto":
        return default
    key = str(name).lower().replace("torch.", "")
    if key not in DTYPE_BYTES:
        raise MemFitError(f"unknown dtype '{name}' (known: {', '.join(sorted(DTYPE_BYTES))})")
    return DTYPE_BYTES[key]


# ---------------------------------------------------------------------------------------------
# model dimensions
# ---------------------------------------------------------------------------------------------
def layer_kinds(text):
    """One kind per decoder layer: attention | sliding | mamba | linear | mlp | moe."""
    n = text.get("num_hidden_layers")
    pattern = text.get("hybrid_override_pattern")
    if pattern:
        table = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
        kinds = [table.get(c) for c in pattern]
        if None in kinds:
            raise MemFitError(f"hybrid_override_pattern: unknown layer symbol in '{pattern}'")
        return kinds
    types = text.get("layer_types")
    if types:
        table = {"full_attention": "attention", "sliding_attention": "sliding",
                 "linear_attention": "linear", "mamba": "mamba", "attention": "attention"}
        return [table.get(t, "attention") for t in types]
    if not n:
        raise MemFitError("config has neither num_hidden_layers nor a layer pattern")
    interval = text.get("full_attention_interval")
    if interval:
        return ["attention" if i % interval == interval - 1 else "linear" for i in range(n)]
    return ["attention"] * int(n)


def _estimate_params(text, kinds):
    h = text["hidden_size"]
    vocab = text.get("vocab_size", 0)
    heads = text.get("num_attention_heads", 0)
    kvh = text.get("num_key_value_heads") or heads
    hd = text.get("head_dim") or (h // heads if heads else 0)
    embed = vocab * h * (1 if text.get("tie_word_embeddings") else 2)
    q_mult = 2 if text.get("attn_output_gate") else 1
    attn = h * heads * hd * q_mult + 2 * h * kvh * hd + heads * hd * h
    experts = text.get("num_experts") or text.get("n_routed_experts") or 0
    moe_i = text.get("moe_intermediate_size") or 0
    shared_i = (text.get("shared_expert_intermediate_size")
                or text.get("moe_shared_expert_intermediate_size") or 0)
    latent = text.get("moe_latent_size")
    gated = text.get("mlp_hidden_act", text.get("hidden_act", "silu")) not in ("relu2",)
    mats = 3 if gated else 2
    if latent:   # Nemotron-H LatentMoE: experts live in the latent space, non-gated relu2
        moe = experts * 2 * latent * moe_i + 2 * h * latent + 2 * h * shared_i + h * experts
    else:
        moe = experts * mats * h * moe_i + mats * h * shared_i + h * experts
    dense_mlp = mats * h * (text.get("intermediate_size") or 0)
    total = embed
    mlp_per_layer = moe if experts else dense_mlp
    for kind in kinds:
        if kind in ("attention", "sliding"):
            total += attn
        elif kind == "mamba":
            mh, mhd = text.get("mamba_num_heads", 0), text.get("mamba_head_dim", 0)
            d_inner = mh * mhd
            ng, st = text.get("n_groups", 1), text.get("ssm_state_size", 0)
            total += h * (2 * d_inner + 2 * ng * st + mh) + d_inner * h
        elif kind == "linear":
            kd = text.get("linear_num_key_heads", 0) * text.get("linear_key_head_dim", 0)
            vh = text.get("linear_num_value_heads", 0)
            vd = vh * text.get("linear_value_head_dim", 0)
            total += h * (2 * kd + vd) + h * vd + 2 * h * vh + vd * h
        elif kind == "mlp":
            total += dense_mlp
        elif kind == "moe":
            total += moe
        # Qwen/Llama-style layers carry their MLP inside the layer; Nemotron-H has separate E/- layers.
        if kind in ("attention", "sliding", "linear") and not text.get("hybrid_override_pattern"):
            total += mlp_per_layer
    return total, embed


def quant_bits(config):
    """Effective bits per quantised weight from quantization_config, or None (unquantised)."""
    qc = config.get("quantization_config") or {}
    if not qc:
        return None
    method = str(qc.get("quant_method", "")).lower()
    algo = str(qc.get("quant_algo", "")).upper()
    if method == "modelopt":
        if "FP4" in algo or "MIXED" in algo:
            return 4.5          # e2m1 + one fp8 scale per 16 weights
        return 8.0
    if method in ("fp8", "fbgemm_fp8", "ptpc_fp8"):
        return 8.0
    if method == "mxfp4":
        return 4.25             # e2m1 + one e8m0 exponent per 32 weights
    if method in ("awq", "gptq", "gptq_marlin", "awq_marlin", "auto-round"):
        bits = qc.get("bits", qc.get("w_bit", 4))
        group = qc.get("group_size", qc.get("q_group_size", 128)) or 128
        group = group if group > 0 else 4096
        return bits + 32.0 / group
    if method == "compressed-tensors":
        for group in (qc.get("config_groups") or {}).values():
            weights = (group or {}).get("weights") or {}
            if weights.get("num_bits"):
                bits = weights["num_bits"]
                size = weights.get("group_size") or 0
                return bits + (8.0 / size if size else 0.0)
        return 8.0
    if method == "bitsandbytes":
        return 4.5 if qc.get("load_in_4bit") else 8.0
    raise MemFitError(f"quantization_config: unknown quant_method '{method}'")


def model_dims(config=None, facts=None):
    """Normalise a config.json and/or model_facts into the numbers the estimate needs.

    The config (the model's own description) wins; model_facts fill in what it lacks, or stand
    alone when no config is at hand.
    """
    facts = facts or {}
    config = config or {}
    text = dict(config.get("text_config") or config)
    dims = {}
    dims["dtype"] = (text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype")
                     or config.get("dtype") or facts.get("dtype") or "bfloat16")
    kinds = layer_kinds(text) if config else None
    if kinds:
        dims["layers"] = len(kinds)
        dims["attention_layer_ids"] = [i for i, k in enumerate(kinds) if k == "attention"]
        dims["sliding_layer_ids"] = [i for i, k in enumerate(kinds) if k == "sliding"]
        dims["state_layer_ids"] = [i for i, k in enumerate(kinds) if k in ("mamba", "linear")]
        dims["state_conv_bytes"], dims["state_ssm_elems"], dims["ssm_dtype"] = _state_parts(text, kinds, config)
        if text.get("hidden_size"):
            dims["params"], dims["embedding_params"] = _estimate_params(text, kinds)
        dims["weight_bits"] = quant_bits(config)
    heads = text.get("num_attention_heads")
    dims["kv_heads"] = text.get("num_key_value_heads") or heads
    dims["head_dim"] = text.get("head_dim") or (text["hidden_size"] // heads if heads and text.get("hidden_size") else None)
    dims["sliding_window"] = text.get("sliding_window")
    dims["max_position_embeddings"] = text.get("max_position_embeddings")
    if text.get("kv_lora_rank"):        # MLA: one latent vector per token, not split by TP
        dims["mla_dim"] = text["kv_lora_rank"] + text.get("qk_rope_head_dim", 0)

    # model_facts fill the gaps
    def missing(key):
        return dims.get(key) is None

    if missing("layers") and facts.get("layers"):
        dims["layers"] = int(facts["layers"])
    if missing("attention_layer_ids") and facts.get("attention_layers") is not None:
        n_attn = int(facts["attention_layers"])
        layers = dims.get("layers") or n_attn
        step = layers / float(n_attn) if n_attn else 0
        dims["attention_layer_ids"] = [int(step * (i + 1)) - 1 for i in range(n_attn)]
    for key in ("kv_heads", "head_dim", "params", "embedding_params", "weight_bits", "max_position_embeddings"):
        if missing(key) and facts.get(key) is not None:
            dims[key] = facts[key]
    if missing("state_conv_bytes") and facts.get("recurrent_state_mib") is not None:
        dims["state_conv_bytes"] = float(facts["recurrent_state_mib"]) * (1 << 20)
    if facts.get("weights_gib") is not None:
        dims["weights_bytes"] = float(facts["weights_gib"]) * GIB
    if missing("weight_bits"):
        dims["weight_bits"] = 8.0 * dtype_bytes(dims["dtype"])
    if missing("embedding_params"):
        dims["embedding_params"] = 0
    for key in ("attention_layer_ids", "kv_heads", "head_dim"):
        if missing(key) and "mla_dim" not in dims:
            raise MemFitError(f"model dimensions: '{key}' unknown (give a config.json or model_facts)")
    if missing("params") and dims.get("weights_bytes") is None:
        raise MemFitError("model dimensions: 'params' unknown (give a config.json or model_facts.params)")
    dims.setdefault("layers", max(dims["attention_layer_ids"] + [0]) + 1)
    for key in ("sliding_layer_ids", "state_layer_ids"):
        dims.setdefault(key, [])
    dims.setdefault("state_conv_bytes", 0.0)
    dims.setdefault("state_ssm_elems", 0.0)
    dims.setdefault("ssm_dtype", dims["dtype"])
    return dims


def _state_parts(text, kinds, config):
    """Fixed recurrent state per sequence, all layers, unsharded: (conv bytes, SSM elements, SSM dtype).

    The SSM dtype is the config's mamba_ssm_dtype (Qwen3.5 ships float32) or the model dtype; the
    engine's --mamba-ssm-cache-dtype overrides it.
    """
    conv_b = dtype_bytes(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "bfloat16")
    ssm_dtype = text.get("mamba_ssm_dtype") or text.get("mamba_ssm_cache_dtype") or text.get(
        "torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "bfloat16"
    conv, elems = 0.0, 0.0
    for kind in kinds:
        if kind == "mamba":
            mh, mhd = text.get("mamba_num_heads", 0), text.get("mamba_head_dim", 0)
            ng, st = text.get("n_groups", 1), text.get("ssm_state_size", 0)
            conv += (mh * mhd + 2 * ng * st) * (text.get("conv_kernel", 4) - 1) * conv_b
            elems += mh * mhd * st
        elif kind == "linear":
            kd = text.get("linear_num_key_heads", 0) * text.get("linear_key_head_dim", 0)
            vh = text.get("linear_num_value_heads", 0)
            vd = vh * text.get("linear_value_head_dim", 0)
            conv += (2 * kd + vd) * (text.get("linear_conv_kernel_dim", 4) - 1) * conv_b
            elems += vh * text.get("linear_key_head_dim", 0) * text.get("linear_value_head_dim", 0)
    return conv, elems, ssm_dtype


# ---------------------------------------------------------------------------------------------
# estimate
# ---------------------------------------------------------------------------------------------
def pp_stages(layers, pp):
    """Contiguous layer ranges per pipeline stage, as even as possible (earlier stages get extras)."""
    base, extra = divmod(layers, pp)
    out, start = [], 0
    for i in range(pp):
        size = base + (1 if i < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def estimate(dims, tp=1, pp=1, max_model_len=None, concurrency=1, kv_cache_dtype="auto",
             node_memory_gib=121.7, gpu_memory_utilization=0.9, gpus_per_node=1,
             host_reserved_gib=HOST_RESERVED_GIB, host_floor_gib=HOST_FLOOR_GIB,
             host_warn_gib=HOST_WARN_GIB, activation_gib=ACTIVATION_GIB,
             mamba_ssm_cache_dtype=None, allow_long_max_model_len=False, kv_pool_gib=None):
    """Per-node memory estimate and a verdict: fit | warn | refuse (with reasons).

    concurrency: how many sequences of full max_model_len length must be resident at once
      (1 = vLLM's own start-up requirement; use max-num-seqs for a worst case).
    The engine pool per node is node_memory x utilisation; it holds weights, activations and the
    KV cache + recurrent state. The host keeps node_memory - engine budget - host_reserved.
    kv_pool_gib: a fixed KV pool per node instead of utilisation x memory (vLLM's CPU backend:
      VLLM_CPU_KVCACHE_SPACE); the engine then takes weights + activations + that pool.
    allow_long_max_model_len: the engine is told to accept a max_model_len past the model's
      max_position_embeddings (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); otherwise that is a warning.
    """
    if max_model_len is None:
        max_model_len = dims.get("max_position_embeddings")
    if not max_model_len:
        raise MemFitError("max_model_len unknown: set --max-model-len/--context-length or give max_position_embeddings")
    max_model_len = int(max_model_len)
    concurrency = max(1, int(concurrency or 1))
    util = float(gpu_memory_utilization)
    ranks_per_node = max(1, min(int(gpus_per_node), tp * pp))

    # weights
    if dims.get("weights_bytes") is not None:
        weights = dims["weights_bytes"]
    else:
        params, embed = float(dims["params"]), float(dims.get("embedding_params") or 0)
        weights = (params - embed) * dims["weight_bits"] / 8.0 + embed * dtype_bytes(dims["dtype"])
    weights_rank = weights / (tp * pp)

    # KV per token per rank: heaviest pipeline stage
    kv_b = dtype_bytes(kv_cache_dtype, default=dtype_bytes(dims["dtype"]))
    stages = pp_stages(int(dims["layers"]), pp)
    attn = set(dims["attention_layer_ids"])
    sliding = set(dims["sliding_layer_ids"])
    state_layers = set(dims["state_layer_ids"])
    if "mla_dim" in dims:
        per_layer_token = dims["mla_dim"] * kv_b
    else:
        per_layer_token = 2 * max(1, math.ceil(dims["kv_heads"] / tp)) * dims["head_dim"] * kv_b
    window = dims.get("sliding_window") or max_model_len
    ssm_dtype = dims.get("ssm_dtype") if mamba_ssm_cache_dtype in (None, "auto") else mamba_ssm_cache_dtype
    state_seq = (dims.get("state_conv_bytes", 0.0)
                 + dims.get("state_ssm_elems", 0.0) * dtype_bytes(ssm_dtype, default=dtype_bytes(dims["dtype"])))
    # State per layer: over the layers that carry it, or spread over all layers (model_facts).
    state_ids = state_layers or set(range(int(dims["layers"])))
    state_per_layer = state_seq / len(state_ids) if state_ids else 0.0
    seq_rank, kv_token_rank = 0.0, 0.0
    for stage in stages:
        tok = sum(1 for i in stage if i in attn) * per_layer_token
        seq = (tok * max_model_len
               + sum(1 for i in stage if i in sliding) * per_layer_token * min(window, max_model_len)
               + sum(1 for i in stage if i in state_ids) * state_per_layer / tp)
        if seq > seq_rank:
            seq_rank, kv_token_rank = seq, tok

    node = ranks_per_node
    weights_node = weights_rank * node / GIB
    activation_node = activation_gib * node
    if kv_pool_gib is None:
        budget = node_memory_gib * util
        pool = budget - weights_node - activation_node
    else:
        pool = float(kv_pool_gib)
        budget = weights_node + activation_node + pool
        util = budget / node_memory_gib
    seq_node = seq_rank * node / GIB
    kv_needed = seq_node * concurrency
    headroom = node_memory_gib - budget - host_reserved_gib
    max_seqs = int(pool // seq_node) if seq_node > 0 and pool > 0 else 0

    reasons = []
    verdict = "fit"
    if weights_node > budget:
        verdict = "refuse"
        reasons.append(f"weights need {weights_node:.1f} GiB per node but the engine may use "
                       f"{budget:.1f} GiB ({util:.2f} x {node_memory_gib:.1f} GiB): add nodes or quantise")
    elif pool < kv_needed:
        verdict = "refuse"
        reasons.append(f"after weights ({weights_node:.1f} GiB) and activations ({activation_node:.1f} GiB) "
                       f"the pool has {pool:.1f} GiB per node, but {concurrency} sequence(s) of "
                       f"{max_model_len} tokens need {kv_needed:.1f} GiB: lower max_model_len or concurrency")
    if headroom < host_floor_gib:
        verdict = "refuse"
        reasons.append(f"the host keeps {headroom:.1f} GiB ({node_memory_gib:.1f} - {budget:.1f} - "
                       f"{host_reserved_gib:.1f} reserved), under the {host_floor_gib:.1f} GiB floor: "
                       f"lower gpu_memory_utilization to {_util_for(node_memory_gib, host_reserved_gib, host_warn_gib):.2f}")
    if verdict == "fit":
        if headroom < host_warn_gib:
            verdict = "warn"
            reasons.append(f"the host keeps only {headroom:.1f} GiB (warn under {host_warn_gib:.1f}): "
                           f"{_util_for(node_memory_gib, host_reserved_gib, host_warn_gib):.2f} utilisation leaves room")
        if pool < kv_needed * KV_MARGIN:
            verdict = "warn"
            reasons.append(f"the KV pool ({pool:.1f} GiB) holds the requested {kv_needed:.1f} GiB with under 10 % to spare")
    notes = []
    mpe = dims.get("max_position_embeddings")
    if mpe and max_model_len > mpe:
        text = f"max_model_len {max_model_len} exceeds the model's max_position_embeddings {mpe}"
        if allow_long_max_model_len:
            notes.append(text + " (allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)")
        else:
            if verdict == "fit":
                verdict = "warn"
            reasons.append(text + " (vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)")
    return {
        "verdict": verdict,
        "reasons": reasons,
        "notes": notes,
        "node_memory_gib": round(node_memory_gib, 2),
        "engine_budget_gib": round(budget, 2),
        "weights_total_gib": round(weights / GIB, 2),
        "weights_per_node_gib": round(weights_node, 2),
        "activation_per_node_gib": round(activation_node, 2),
        "kv_pool_per_node_gib": round(pool, 2),
        "kv_bytes_per_token_per_node": int(kv_token_rank * node),
        "seq_per_node_gib": round(seq_node, 3),
        "kv_needed_per_node_gib": round(kv_needed, 2),
        "max_full_length_seqs": max_seqs,
        "host_headroom_gib": round(headroom, 2),
        "max_model_len": max_model_len,
        "concurrency": concurrency,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
    }


def _util_for(node_memory_gib, reserved, keep):
    return max(0.0, math.floor((node_memory_gib - reserved - keep) / node_memory_gib * 100) / 100.0)


def fit(config=None, facts=None, **kwargs):
    """model_dims() + estimate() in one call."""
    return estimate(model_dims(config, facts), **kwargs)


def profile_fit(prof, plan=None, node_memory_gib=121.7, model_config=None, overrides=None,
                concurrency=1, env=None, **knobs):
    """estimate() for a resolved serve profile split as `plan` (planner.plan's layout): its serving
    flags (max model length, utilisation, KV dtype and pool), its model_facts unless a config.json
    (model_config) is given. The serve role (filter memory_fit) and the controller gate both call it."""
    plan = plan or {}
    overrides = overrides or {}
    params = _profiles.serving_params(prof, overrides)
    tp = plan.get("tensor_parallel_size") or overrides.get("tensor_parallel_size") or prof.get("tensor_parallel_size") or 1
    pp = plan.get("pipeline_parallel_size") or overrides.get("pipeline_parallel_size") or prof.get("pipeline_parallel_size") or 1
    default_util = 0.9 if prof.get("engine") == "vllm" else 0.85
    dims = model_dims(model_config or None, prof.get("model_facts"))
    env = {**(prof.get("env") or {}), **(env or {})}
    gpus_per_node = int(plan.get("gpus_per_node", 1))
    # A fixed KV pool wins over the utilisation share: --kv-cache-memory-bytes (per GPU/rank,
    # vLLM >= 0.11: "ignores gpu_memory_utilization"), else the CPU build's VLLM_CPU_KVCACHE_SPACE.
    kv_pool = None
    if params.get("kv_cache_memory_bytes") not in (None, False):
        ranks_per_node = max(1, min(gpus_per_node, int(tp) * int(pp)))
        kv_pool = parse_human_int(params["kv_cache_memory_bytes"]) * ranks_per_node / GIB
    elif prof.get("device") == "cpu":
        kv_pool = float(env.get("VLLM_CPU_KVCACHE_SPACE", 4))
    return estimate(
        dims, tp=int(tp), pp=int(pp), max_model_len=params.get("max_model_len"),
        concurrency=concurrency, kv_cache_dtype=params.get("kv_cache_dtype") or "auto",
        node_memory_gib=float(node_memory_gib),
        gpu_memory_utilization=float(params.get("gpu_memory_utilization") or default_util),
        gpus_per_node=gpus_per_node,
        mamba_ssm_cache_dtype=params.get("mamba_ssm_cache_dtype"),
        allow_long_max_model_len=str(env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN")) == "1",
        kv_pool_gib=kv_pool,
        **{k: float(v) for k, v in knobs.items()})
