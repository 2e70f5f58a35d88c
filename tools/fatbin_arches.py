# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""List the GPU kernel builds inside a wheel's CUDA libraries, and which of them do not load on a
device arch: the evidence behind the cutlass-fp8-sm121 patch's needed_for (roles/engine_patches/README.md).

    python3 tools/fatbin_arches.py --device sm_121 vllm-0.18.1-*.whl vllm-0.32.0-*.whl

(wheels from `pip download --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64
--python-version 3.12 vllm==X`). Prints one line per library: its builds, and the ones that target
the device's major but do not load on it (arch-specific builds of another minor)."""
import argparse
import fnmatch
import os
import sys
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins", "module_utils"))
import fatbin  # noqa: E402  (pure module_utils, imported by path)


def libraries(path, member):
    """(name, bytes) of the libraries in a wheel matching ``member``; a bare .so is read as it is."""
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as fh:
            yield os.path.basename(path), fh.read()
        return
    with zipfile.ZipFile(path) as zf:
        for name in sorted(n for n in zf.namelist() if fnmatch.fnmatch(n, member)):
            yield name, zf.read(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheels", nargs="+")
    ap.add_argument("--device", default="sm_121")
    ap.add_argument("--member", default="vllm/_C*.abi3.so", help="glob of the libraries to read")
    args = ap.parse_args()
    for wheel in args.wheels:
        for name, data in libraries(wheel, args.member):
            counts = fatbin.summary(fatbin.entries(data))
            gap = fatbin.arch_specific_gap(counts, args.device)
            builds = " ".join("%s=%d" % kv for kv in counts.items() if kv[0].startswith("sm_"))
            print("%s %s: %s | not loadable on %s: %s"
                  % (os.path.basename(wheel), name, builds, args.device, ",".join(gap) or "none"))


if __name__ == "__main__":
    main()
