# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""SIM-ONLY hook (llmfleet sim lab; see the README beside it): define torchvision's nms/qnms op
schemas before a CUDA torchvision is imported beside torch+cpu.

Loaded by a .pth at interpreter start, it only installs a meta-path finder (no torch import);
the first `import torchvision` triggers the definitions and removes the finder.
"""
import sys

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_LIBRARY = []  # keeps the torch.library fragment alive


def define_schemas():
    import torch

    lib = torch.library.Library("torchvision", "FRAGMENT")
    for op, schema in _SCHEMAS.items():
        try:
            torch._C._dispatch_find_schema_or_throw(f"torchvision::{op}", "")
        except RuntimeError:
            lib.define(schema)
    _LIBRARY.append(lib)


class _BeforeTorchvision:
    """Meta-path finder that runs define_schemas() once, just before torchvision loads."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        del path, target
        if name == "torchvision":
            sys.meta_path[:] = [f for f in sys.meta_path if f is not _BeforeTorchvision]
            define_schemas()
        return None


if _BeforeTorchvision not in sys.meta_path:
    sys.meta_path.insert(0, _BeforeTorchvision)
