# -*- coding: utf-8 -*-
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Which GPU architectures a CUDA library's embedded kernels load on (pure Python, no CUDA).

A CUDA shared object carries its kernels in fat binaries: a header (magic 0xBA55ED50) and
entries, each a PTX text or an ELF (SASS) for one SM version. The entry's flags say whether a
SASS build is plain (sm_120: loads on sm_12x with minor >= 0), arch-specific (sm_120a: loads on
sm_120 only) or family-specific (sm_120f: loads on every sm_12x of minor >= 0). The flag bits were
read from fatbins that nvcc 13.0 wrote for each kind (tests/unit/fixtures/fatbin/).

Used to answer, from the published wheels, whether an engine release needs a source patch on an
arch (vLLM <= 0.19 ships its sm_12x CUTLASS FP8 kernels as sm_120a only: not loadable on GB10,
sm_121).
"""

from __future__ import annotations

import struct
from collections import Counter

MAGIC = 0xBA55ED50
KIND = {1: "ptx", 2: "elf"}
ARCH_SPECIFIC = 0x100000    # sm_XYa
FAMILY_SPECIFIC = 0x200000  # sm_XYf


def entries(data):
    """[(kind, sm, suffix)] of every fatbin entry in ``data`` (bytes of a .so, .cubin or .fatbin).

    kind is 'ptx' or 'elf'; sm an int (120); suffix '', 'a' or 'f'."""
    out, pos, magic = [], 0, struct.pack("<I", MAGIC)
    while True:
        i = data.find(magic, pos)
        if i < 0:
            return out
        _version, header_size, fat_size = struct.unpack_from("<HHQ", data, i + 4)
        if header_size != 16 or i + 16 + fat_size > len(data):
            pos = i + 4
            continue
        entry, end = i + header_size, i + header_size + fat_size
        while entry + 64 <= end:
            kind, _unused, entry_header, size = struct.unpack_from("<HHIQ", data, entry)
            if entry_header < 64 or size == 0:
                break
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            flags = struct.unpack_from("<Q", data, entry + 40)[0]
            suffix = "a" if flags & ARCH_SPECIFIC else "f" if flags & FAMILY_SPECIFIC else ""
            out.append((KIND.get(kind, str(kind)), sm, suffix))
            entry += entry_header + size
        pos = end


def summary(found):
    """{'sm_120a': n, 'sm_120f': n, 'sm_120': n, 'ptx_90': n, ...} counted over entries()."""
    counts = Counter()
    for kind, sm, suffix in found:
        counts[("sm_%d%s" % (sm, suffix)) if kind == "elf" else "ptx_%d" % sm] += 1
    return dict(sorted(counts.items()))


def sass_loads_on(build, device):
    """Whether SASS built for ``build`` ('sm_120', 'sm_120a', 'sm_120f') loads on ``device`` ('sm_121')."""
    b, d = build[3:], device[3:]
    suffix = b[-1] if b[-1] in "af" else ""
    b_num, d_num = int(b.rstrip("af")), int(d.rstrip("af"))
    if suffix == "a":
        return b_num == d_num
    return b_num // 10 == d_num // 10 and d_num >= b_num


def arch_specific_gap(counts, device):
    """SASS builds in ``counts`` (summary()) that target ``device``'s major but do not load on it.

    -> sorted build names (e.g. ['sm_120a'] for vLLM 0.18.1 on sm_121); [] when every build of
    that major loads there."""
    major = int(device[3:].rstrip("af")) // 10
    return sorted(name for name in counts if name.startswith("sm_")
                  and int(name[3:].rstrip("af")) // 10 == major and not sass_loads_on(name, device))
