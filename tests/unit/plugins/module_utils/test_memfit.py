"""Memory fit, validated against the field notes' figures, as data tables.

The configs are the models' published config.json files (tests/unit/fixtures/model_configs/).
A DGX Spark shows 121.7 GiB of memory (notes 004: `total 121.7G`).
"""
import json
import os

import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import memfit

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "fixtures", "model_configs")
SPARK_GIB = 121.7
GB = 1e9 / memfit.GIB      # one decimal gigabyte in GiB


def config(name):
    with open(os.path.join(FIXTURES, name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


NEMOTRON = config("nemotron-3-super-120b-a12b-nvfp4")
QWEN122 = config("qwen3.5-122b-a10b-fp8")
QWEN35 = config("qwen3.5-35b-a3b")
LLAMA70 = config("llama-3.3-70b-instruct")
TINY = config("tiny-llama")


# ------------------------------------------------------------------------------------------------
# dimensions read from config.json
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg, params_b, bits, attn_layers, state_layers, kv_heads, head_dim", [
    # published totals: Nemotron 3 Super 120.6B, Qwen3.5-122B-A10B 122B, Llama 3.3 70.6B, Qwen3.5-35B-A3B 35B
    (NEMOTRON, (120.0, 121.5), 4.5, 8, 40, 2, 128),
    (QWEN122, (121.0, 123.0), 8.0, 12, 36, 2, 256),
    (LLAMA70, (70.0, 71.0), 16.0, 80, 0, 8, 128),
    (QWEN35, (34.0, 35.5), 16.0, 10, 30, 2, 256),
    (TINY, (0.004, 0.0045), 32.0, 2, 0, 2, 16),
])
def test_model_dims_from_config(cfg, params_b, bits, attn_layers, state_layers, kv_heads, head_dim):
    dims = memfit.model_dims(cfg)
    assert params_b[0] <= dims["params"] / 1e9 <= params_b[1]
    assert dims["weight_bits"] == bits
    assert len(dims["attention_layer_ids"]) == attn_layers
    assert len(dims["state_layer_ids"]) == state_layers
    assert (dims["kv_heads"], dims["head_dim"]) == (kv_heads, head_dim)


@pytest.mark.parametrize("text, kinds", [
    ({"hybrid_override_pattern": "M-M*E"}, ["mamba", "mlp", "mamba", "attention", "moe"]),
    ({"layer_types": ["linear_attention", "full_attention", "sliding_attention"]}, ["linear", "attention", "sliding"]),
    ({"num_hidden_layers": 8, "full_attention_interval": 4}, ["linear"] * 3 + ["attention"] + ["linear"] * 3 + ["attention"]),
    ({"num_hidden_layers": 3}, ["attention"] * 3),
])
def test_layer_kinds(text, kinds):
    assert memfit.layer_kinds(text) == kinds


def test_nemotron_attention_layers_are_where_the_pattern_puts_them():
    assert memfit.model_dims(NEMOTRON)["attention_layer_ids"] == [7, 16, 25, 36, 47, 58, 69, 78]


@pytest.mark.parametrize("qc, bits", [
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 4.5),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, 8.0),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, 8.0),
    ({"quant_method": "mxfp4"}, 4.25),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, 4.25),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, 8.0078125),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 16}}}}, 4.5),
    ({}, None),
])
def test_quant_bits(qc, bits):
    assert memfit.quant_bits({"quantization_config": qc}) == bits


# ------------------------------------------------------------------------------------------------
# the notes' figures
# ------------------------------------------------------------------------------------------------
def test_nemotron_nvfp4_weights_per_node_at_tp2():
    """Notes 004: 'NVFP4 weights are ~60-80 GB total -> ~30-40 GB per node' at TP=2."""
    out = memfit.fit(NEMOTRON, tp=2, max_model_len=262144, kv_cache_dtype="fp8",
                     node_memory_gib=SPARK_GIB, gpu_memory_utilization=0.75)
    assert 60 <= out["weights_total_gib"] / GB <= 80
    assert 30 <= out["weights_per_node_gib"] / GB <= 40


def test_nemotron_context_growth_512k_to_1m():
    """Notes 004: 512k -> 1M 'projected ~9-10 GB per node' and 'not 30' because only attention
    layers grow. From the published config: 8 attention layers x K+V x 1 KV head per rank (2 heads
    over TP=2) x 128 x 1 byte (fp8) = 2 KiB per token per node, so one full-length sequence grows by
    1 GiB; the notes' ~10 GB matches about ten resident full-length sequences (or memory outside
    the KV cache), and stays under their bound. A dense 88-attention-layer model would grow 11x."""
    common = dict(tp=2, kv_cache_dtype="fp8", node_memory_gib=SPARK_GIB, gpu_memory_utilization=0.75)
    at_512k = memfit.fit(NEMOTRON, max_model_len=524288, **common)
    at_1m = memfit.fit(NEMOTRON, max_model_len=1048576, **common)
    assert at_1m["kv_bytes_per_token_per_node"] == 8 * 2 * 1 * 128 * 1
    growth = at_1m["kv_needed_per_node_gib"] - at_512k["kv_needed_per_node_gib"]
    assert growth == pytest.approx(1.0, abs=0.01)
    ten = (memfit.fit(NEMOTRON, max_model_len=1048576, concurrency=10, **common)["kv_needed_per_node_gib"]
           - memfit.fit(NEMOTRON, max_model_len=524288, concurrency=10, **common)["kv_needed_per_node_gib"])
    assert 9 * GB <= ten <= 10.8
    dense = dict(NEMOTRON, hybrid_override_pattern="*" * 88)
    dense_growth = (memfit.fit(dense, max_model_len=1048576, **common)["kv_needed_per_node_gib"]
                    - memfit.fit(dense, max_model_len=524288, **common)["kv_needed_per_node_gib"])
    assert dense_growth == pytest.approx(11 * growth, rel=0.01)


def test_nemotron_512k_host_headroom_matches_the_snapshot():
    """Notes 004 at 512k, 0.75: 'avail 18.2G' of 121.7G. The host_reserved default is set from it."""
    out = memfit.fit(NEMOTRON, tp=2, max_model_len=524288, kv_cache_dtype="fp8",
                     node_memory_gib=SPARK_GIB, gpu_memory_utilization=0.75, allow_long_max_model_len=True)
    assert out["host_headroom_gib"] == pytest.approx(18.2, abs=0.5)
    assert out["verdict"] == "fit"
    assert "allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in out["notes"][0]


FIT_TABLE = [
    # (id, config, kwargs, verdict, reason substring)
    ("004 Nemotron 1M TP=2 at 0.75, long context allowed", NEMOTRON,
     dict(tp=2, max_model_len=1048576, kv_cache_dtype="fp8", gpu_memory_utilization=0.75, allow_long_max_model_len=True),
     "fit", None),
    ("004 Nemotron 1M without VLLM_ALLOW_LONG_MAX_MODEL_LEN", NEMOTRON,
     dict(tp=2, max_model_len=1048576, kv_cache_dtype="fp8", gpu_memory_utilization=0.75),
     "warn", "exceeds the model's max_position_embeddings 262144"),
    ("002 Qwen3.5-122B FP8 on 2 Sparks TP=2 at 0.80, 16k", QWEN122,
     dict(tp=2, max_model_len=16384, gpu_memory_utilization=0.80), "fit", None),
    ("000 Qwen3.5-122B FP8 PP=4 at 0.85, 32k: the host keeps only ~6 GiB", QWEN122,
     dict(pp=4, max_model_len=32768, gpu_memory_utilization=0.85), "warn", "the host keeps only 6.3 GiB"),
    ("Qwen3.5-122B FP8 on one Spark: weights alone do not fit", QWEN122,
     dict(tp=1, max_model_len=16384, gpu_memory_utilization=0.80), "refuse", "weights need 115.1 GiB per node"),
    ("Llama-3.3-70B bf16 on one 128 GB node at 0.85", LLAMA70,
     dict(tp=1, max_model_len=2048, gpu_memory_utilization=0.85, node_memory_gib=128 * GB),
     "refuse", "weights need 131.4 GiB per node"),
    ("003 Llama-3.3-70B bf16 TP=2 at 0.70, 2048 tokens", LLAMA70,
     dict(tp=2, max_model_len=2048, gpu_memory_utilization=0.70), "fit", None),
    ("Llama-3.3-70B TP=2 at 0.70 with its full 128k context x 8", LLAMA70,
     dict(tp=2, max_model_len=131072, concurrency=8, gpu_memory_utilization=0.70),
     "refuse", "8 sequence(s) of 131072 tokens need 160.0 GiB"),
    ("004's gpt-oss lesson: 0.90 starves the host", QWEN35,
     dict(tp=1, max_model_len=32768, gpu_memory_utilization=0.90), "refuse", "under the 6.0 GiB floor: lower gpu_memory_utilization to 0.81"),
    ("002 Qwen3.5-35B-A3B single node at 0.85", QWEN35,
     dict(tp=1, max_model_len=32768, gpu_memory_utilization=0.85), "warn", "the host keeps only"),
    ("sim tiny llama", TINY, dict(tp=2, max_model_len=512, node_memory_gib=8, gpu_memory_utilization=0.3,
                                  host_reserved_gib=1, host_floor_gib=1, host_warn_gib=2, activation_gib=0.1),
     "fit", None),
]


@pytest.mark.parametrize("cfg, kwargs, verdict, reason", [row[1:] for row in FIT_TABLE], ids=[row[0] for row in FIT_TABLE])
def test_verdicts(cfg, kwargs, verdict, reason):
    kwargs = dict(kwargs)
    kwargs.setdefault("node_memory_gib", SPARK_GIB)
    out = memfit.fit(cfg, **kwargs)
    assert out["verdict"] == verdict, out["reasons"]
    if reason:
        assert any(reason in r for r in out["reasons"]), out["reasons"]
    else:
        assert out["reasons"] == []


@pytest.mark.parametrize("cfg, facts", [
    (NEMOTRON, {"params": 120665931776, "embedding_params": 1073741824, "weight_bits": 4.5, "dtype": "bfloat16",
                "layers": 88, "attention_layers": 8, "kv_heads": 2, "head_dim": 128, "recurrent_state_mib": 82.3,
                "max_position_embeddings": 262144}),
    (QWEN122, {"params": 122109296640, "embedding_params": 1525678080, "weight_bits": 8, "dtype": "bfloat16",
               "layers": 48, "attention_layers": 12, "kv_heads": 2, "head_dim": 256, "recurrent_state_mib": 146.5,
               "max_position_embeddings": 262144}),
])
def test_model_facts_agree_with_config(cfg, facts):
    """The shipped profiles' model_facts give the same estimate as the config they were read from."""
    kwargs = dict(tp=2, max_model_len=65536, kv_cache_dtype="fp8", gpu_memory_utilization=0.8)
    by_config = memfit.fit(cfg, **kwargs)
    by_facts = memfit.fit(facts=facts, **kwargs)
    assert by_facts["verdict"] == by_config["verdict"]
    for key in ("weights_per_node_gib", "kv_needed_per_node_gib", "kv_bytes_per_token_per_node"):
        assert by_facts[key] == pytest.approx(by_config[key], rel=0.01), key


def test_pipeline_split_takes_the_heaviest_stage():
    # 88 Nemotron layers in 4 stages of 22: attention layers 7,16 | 25,36 | 47,58 | 69,78 -> 2 each
    out = memfit.fit(NEMOTRON, pp=4, max_model_len=1000, kv_cache_dtype="fp8")
    assert out["kv_bytes_per_token_per_node"] == 2 * 2 * 2 * 128
    assert [len(s) for s in memfit.pp_stages(88, 4)] == [22, 22, 22, 22]
    assert [len(s) for s in memfit.pp_stages(10, 4)] == [3, 3, 2, 2]


@pytest.mark.parametrize("kwargs, message", [
    (dict(config={"hidden_size": 8}), "config has neither num_hidden_layers nor a layer pattern"),
    (dict(facts={"layers": 2}), "model dimensions: 'attention_layer_ids' unknown"),
    (dict(facts={"attention_layers": 2, "kv_heads": 2, "head_dim": 8}), "model dimensions: 'params' unknown"),
    (dict(config={"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
                  "quantization_config": {"quant_method": "hqq"}}), "unknown quant_method 'hqq'"),
])
def test_dims_errors(kwargs, message):
    with pytest.raises(memfit.MemFitError) as err:
        memfit.model_dims(**kwargs)
    assert message in str(err.value)


def test_estimate_needs_a_context_length():
    with pytest.raises(memfit.MemFitError, match="max_model_len unknown"):
        memfit.fit(facts={"params": 1e9, "attention_layers": 2, "kv_heads": 2, "head_dim": 8})


def test_mla_cache_is_not_split_by_tp():
    cfg = {"num_hidden_layers": 4, "num_attention_heads": 16, "hidden_size": 1024, "kv_lora_rank": 512,
           "qk_rope_head_dim": 64, "num_key_value_heads": 16, "vocab_size": 1000, "intermediate_size": 2048}
    one, two = (memfit.fit(cfg, tp=tp, max_model_len=100, node_memory_gib=64, gpu_memory_utilization=0.5)
                for tp in (1, 2))
    assert one["kv_bytes_per_token_per_node"] == two["kv_bytes_per_token_per_node"] == 4 * 576 * 2


def test_config_wins_over_model_facts():
    wrong = {"params": 1e9, "attention_layers": 88, "kv_heads": 8, "head_dim": 64}
    dims = memfit.model_dims(NEMOTRON, wrong)
    assert len(dims["attention_layer_ids"]) == 8 and dims["kv_heads"] == 2 and dims["params"] > 1e11


def test_cpu_backend_pool_is_fixed():
    """vLLM's CPU build takes VLLM_CPU_KVCACHE_SPACE GiB for KV instead of a utilisation share."""
    out = memfit.fit(TINY, tp=2, max_model_len=512, node_memory_gib=8, kv_pool_gib=1, activation_gib=0.1,
                     host_reserved_gib=2, host_floor_gib=1, host_warn_gib=2)
    assert out["kv_pool_per_node_gib"] == 1
    assert out["engine_budget_gib"] == pytest.approx(1.1 + out["weights_per_node_gib"], abs=0.01)
    assert out["verdict"] == "fit"


@pytest.mark.parametrize("value, expected", [
    (68719476736, 68719476736), ("64M", 64 << 20), ("1k", 1000), ("1K", 1024), ("1.5g", 1_500_000_000),
    ("2G", 2 << 30), ("512", 512), ("4GiB", 4 << 30),
])
def test_parse_human_int(value, expected):
    """vLLM's --kv-cache-memory-bytes: lowercase multipliers decimal, uppercase binary."""
    assert memfit.parse_human_int(value) == expected


@pytest.mark.parametrize("value", ["1.5G", "lots", "", None, True])
def test_parse_human_int_errors(value):
    with pytest.raises(memfit.MemFitError):
        memfit.parse_human_int(value)


def test_nemotron_pp4_on_the_lab_warns_near_the_floor():
    """Notes 000: PP=4 at 0.85 on 121.7 GiB leaves the host 121.7 x 0.15 - 12 = 6.3 GiB: above the
    6 GiB floor, under the 10 GiB warning."""
    out = memfit.fit(NEMOTRON, pp=4, max_model_len=32768, kv_cache_dtype="fp8",
                     node_memory_gib=SPARK_GIB, gpu_memory_utilization=0.85)
    assert out["verdict"] == "warn"
    assert out["host_headroom_gib"] == pytest.approx(6.26, abs=0.05)
    assert any("the host keeps only 6.3 GiB (warn under 10.0)" in r for r in out["reasons"])
