# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""SIM-ONLY stand-in for sgl-kernel on CPU nodes (llmfleet sim lab; see the README beside it).

SGLang's CPU path imports several names from sgl_kernel at module load (the allocator's and the
speculative decoder's CPU kernels). The allocator's request -> token-slot write is implemented here
in plain torch; every other name is a stub that raises NotImplementedError when called, so an
import succeeds and a use fails loudly, naming the kernel.
"""
__version__ = "0.0.1+llmfleet.sim"
SIM_STANDIN = True


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset,
                                 out_cache_loc, pool_len):
    """Write each request's new cache slots into its row of the request -> token table.

    Row req_pool_indices[i] gets out_cache_loc[sum of earlier lengths : + length] at columns
    start_offset[i]:end_offset[i] (what the Triton kernel of sglang/srt/mem_cache/allocation.py
    does on GPUs). pool_len is the table's row length, kept for the kernel's signature.
    """
    del pool_len
    lengths = (end_offset - start_offset).tolist()
    offset = 0
    for row, start, length in zip(req_pool_indices.tolist(), start_offset.tolist(), lengths):
        req_to_token[row, start:start + length] = out_cache_loc[offset:offset + length].to(req_to_token.dtype)
        offset += length


def _missing(name):
    def kernel(*args, **kwargs):
        del args, kwargs
        raise NotImplementedError(
            f"sgl_kernel.{name}: not implemented by the llmfleet sim stand-in of sgl-kernel "
            "(CPU sim nodes only; a real node installs sgl-kernel)")
    kernel.__name__ = name
    return kernel


def __getattr__(name):
    """Any other kernel: a stub that raises NotImplementedError when called (dunders stay absent)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return _missing(name)
