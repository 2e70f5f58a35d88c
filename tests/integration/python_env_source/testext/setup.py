"""llmfleet-testext: a tiny C extension built from source by the python_env role's build node.

Its compile flags come from the build environment, as vLLM's do (TORCH_CUDA_ARCH_LIST, MAX_JOBS):
the values are compiled into the extension, so an installed copy says which env built it.
"""
import os

from setuptools import Extension, setup

ARCH = os.environ.get("TORCH_CUDA_ARCH_LIST")
if not ARCH:
    raise SystemExit("llmfleet-testext: TORCH_CUDA_ARCH_LIST is not set: the build env did not reach the build")


def cstr(value):
    return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')


setup(
    name="llmfleet-testext",
    version="1.0",
    description="Test C extension for llmfleet's build-from-source path",
    ext_modules=[Extension(
        "llmfleet_testext",
        sources=["src/llmfleet_testext.c"],
        define_macros=[("LLMFLEET_ARCH_LIST", cstr(ARCH)),
                       ("LLMFLEET_MAX_JOBS", cstr(os.environ.get("MAX_JOBS", "")))],
    )],
)
