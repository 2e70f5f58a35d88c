# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Make a tiny random-weight Llama (HF format) that vLLM can serve, without any hub access.

Usage:
  make_tiny_llama.py OUTDIR [--seed 0] [--hidden 128] [--layers 4] [--heads 4] [--kv-heads 2]
                            [--vocab 512] [--max-pos 512] [--no-think] [--intermediate 2*hidden]

What it writes to OUTDIR (the same bytes for the same arguments and library versions):
  config.json, generation_config.json, model.safetensors      (LlamaForCausalLM, float32)
  tokenizer.json, tokenizer_config.json, special_tokens_map.json / chat_template.jinja
                                                              (byte-level BPE trained here)

The tokenizer is a byte-level BPE trained in-process on a small built-in text, so it encodes any
input (no UNK) and needs no download. A Llama-3-style chat template is attached so
``/v1/chat/completions`` works. Default sizes keep head_dim = hidden/heads = 32 (vLLM's CPU
attention supports head sizes 32, 64, 80, ...) and heads/kv-heads divisible by 2 for
``--tensor-parallel-size 2``; 4 layers give each stage of ``--pipeline-parallel-size 2`` two
layers. The weights are random: the model talks gibberish, which is all a serving test needs.

Reasoning: the vocabulary carries ``<think>`` and ``</think>`` as added (not special) tokens, as
reasoning models' tokenizers do, so vLLM's ``--reasoning-parser deepseek_r1`` (which looks both up
in the vocabulary) can serve it; that parser counts everything before ``</think>`` as reasoning,
so even the random model's output comes back as ``reasoning`` (``--no-think`` leaves them out).

Needs: torch, transformers, tokenizers, safetensors (all in the engine's wheelhouse).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

CORPUS = """\
The quick brown fox jumps over the lazy dog. A cluster of small nodes serves a tiny model.
Each node runs an engine; the head node answers requests and the workers hold shards.
Hello! How are you today? I am fine, thank you. What is the capital of France? Paris.
Tensor parallelism splits every layer across ranks; pipeline parallelism splits the layers.
The scheduler batches requests, the cache keeps keys and values, and tokens stream back.
One two three four five six seven eight nine ten. Red green blue yellow black white.
def add(a, b): return a + b  # numbers 0 1 2 3 4 5 6 7 8 9 and symbols {}[]()<>:;,.!?-_=+*/
Write a haiku about GPUs. Silent silicon hums; matrices bloom in the dark; answers come back fast.
system user assistant tool message content role name
"""

BOS, EOS, EOT = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
SH, EH = "<|start_header_id|>", "<|end_header_id|>"
PAD = "<|pad|>"
SPECIAL = [BOS, EOS, SH, EH, EOT, PAD]
THINK = ["<think>", "</think>"]

# Llama-3 style template (text only). add_generation_prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}"
    "{{ part['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
    "{{ '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)


def build_tokenizer(vocab_size: int, think: bool = True):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    if think:
        # whole tokens (never split by BPE), decoded as text like Qwen3's/DeepSeek-R1's
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK])
    return tok


def make(outdir: Path, seed: int, hidden: int, layers: int, heads: int, kv_heads: int,
         vocab: int, max_pos: int, think: bool = True, intermediate: int = 0) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if hidden % heads or heads % kv_heads:
        raise SystemExit("hidden must be divisible by heads, and heads by kv-heads")
    outdir.mkdir(parents=True, exist_ok=True)

    tok = build_tokenizer(vocab, think)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOT, pad_token=PAD,
        model_max_length=max_pos, clean_up_tokenization_spaces=False,
    )
    hf_tok.chat_template = CHAT_TEMPLATE
    hf_tok.save_pretrained(str(outdir))

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        intermediate_size=intermediate or hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        max_position_embeddings=max_pos,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        bos_token_id=tok.token_to_id(BOS),
        eos_token_id=[tok.token_to_id(EOT), tok.token_to_id(EOS)],
        pad_token_id=tok.token_to_id(PAD),
        tie_word_embeddings=False,
        initializer_range=0.02,
        dtype="float32",
    )
    with torch.no_grad():
        model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.generation_config.do_sample = False
    model.save_pretrained(str(outdir), safe_serialization=True)

    # transformers 5 writes its own class name; the generic one loads on 4.x and 5.x alike.
    tc_path = outdir / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc_path.write_text(json.dumps(tc, indent=2, sort_keys=True) + "\n")
    for f in outdir.iterdir():
        if f.is_file():
            f.chmod(0o644)

    files = sorted(p.name for p in outdir.iterdir() if p.is_file())
    digests = {f: hashlib.sha256((outdir / f).read_bytes()).hexdigest()[:16] for f in files}
    return {
        "outdir": str(outdir),
        "params": sum(p.numel() for p in model.parameters()),
        "vocab_size": config.vocab_size,
        "think_tokens": {t: tok.token_to_id(t) for t in THINK} if think else {},
        "files": digests,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--max-pos", type=int, default=512)
    ap.add_argument("--intermediate", type=int, default=0,
                    help="MLP width (default 2 x hidden); a real model's shape, e.g. Llama-3.2-1B: "
                         "--hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192")
    ap.add_argument("--no-think", dest="think", action="store_false",
                    help="leave <think>/</think> out of the vocabulary")
    a = ap.parse_args(argv)
    info = make(a.outdir, a.seed, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab, a.max_pos, a.think,
                a.intermediate)
    json.dump(info, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
