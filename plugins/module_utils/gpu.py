# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Pure parsers for ``nvidia-smi`` output (no I/O).

The module runs::

    nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,uuid \\
               --format=csv,noheader,nounits

and plain ``nvidia-smi`` for the "CUDA Version: 13.0" header. A GPU entry is::

    {'index': 0, 'name': 'NVIDIA GB10', 'compute_cap': '12.1', 'arch': 'sm_121',
     'driver_version': '580.95.05', 'memory_mib': None, 'unified_memory': True,
     'uuid': 'GPU-...'}

``memory.total`` is ``[N/A]`` on unified-memory parts (GB10, Thor): that gives
``memory_mib: None, unified_memory: True``.
"""

import csv
import re

QUERY_FIELDS = ('index', 'name', 'compute_cap', 'driver_version', 'memory.total', 'uuid')
QUERY_ARGS = ('--query-gpu=' + ','.join(QUERY_FIELDS), '--format=csv,noheader,nounits')

# nvidia-smi's words for "no value". Only the first two mean "this GPU has no
# dedicated framebuffer" when they stand for memory.total.
_NOT_SUPPORTED = ('N/A', 'Not Supported')
_NO_VALUE = _NOT_SUPPORTED + ('Unknown Error', 'Insufficient Permissions', 'GPU is lost',
                              'Requested functionality has been deprecated')

NO_DEVICES_MARKERS = ('No devices were found', 'No devices found')

_CAP_RE = re.compile(r'^(\d+)\.(\d+)$')
_CUDA_RE = re.compile(r'CUDA Version\s*:\s*(\d+(?:\.\d+)*)')
_DRIVER_RE = re.compile(r'Driver Version\s*:\s*(\d+(?:\.\d+)*)')


def _unbracket(value):
    value = (value or '').strip()
    if value.startswith('[') and value.endswith(']'):
        value = value[1:-1].strip()
    return value


def _value(value):
    """Strip nvidia-smi's brackets; None for N/A-like values."""
    value = _unbracket(value)
    if not value or value in _NO_VALUE:
        return None
    return value


def compute_cap_to_arch(compute_cap):
    """``'12.1'`` -> ``'sm_121'``, ``'9.0'`` -> ``'sm_90'``, ``'11.0'`` -> ``'sm_110'``.

    None for anything that is not ``<major>.<minor>``.
    """
    m = _CAP_RE.match((compute_cap or '').strip())
    if not m:
        return None
    return 'sm_%d%d' % (int(m.group(1)), int(m.group(2)))


def parse_memory(value):
    """``(memory_mib, unified_memory)`` from a ``memory.total`` field (nounits).

    ``'81559'`` -> ``(81559, False)``; ``'[N/A]'`` -> ``(None, True)``;
    an error value (``[Unknown Error]``) -> ``(None, False)``.
    """
    raw = _unbracket(value)
    if raw in _NOT_SUPPORTED:
        return None, True
    raw = re.sub(r'\s*MiB$', '', raw)  # tolerate output taken without nounits
    if raw.isdigit():
        return int(raw), False
    return None, False


def parse_query_gpu(text):
    """Parse the CSV of the query above.

    Returns ``(gpus, malformed)``; ``malformed`` lists
    ``{'line_number': n, 'line': text}`` for rows that do not have the expected
    fields. Never raises on bad input.
    """
    gpus = []
    malformed = []
    for number, raw in enumerate((text or '').splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            fields = next(csv.reader([raw], skipinitialspace=True))
        except (csv.Error, StopIteration):
            fields = []
        fields = [f.strip() for f in fields]
        index = _value(fields[0]) if fields else None
        if len(fields) != len(QUERY_FIELDS) or index is None or not index.isdigit():
            malformed.append({'line_number': number, 'line': raw.rstrip()})
            continue
        _index, name, cap, driver, memory, uuid = fields
        memory_mib, unified = parse_memory(memory)
        cap = _value(cap)
        gpus.append({
            'index': int(index),
            'name': _value(name),
            'compute_cap': cap,
            'arch': compute_cap_to_arch(cap),
            'driver_version': _value(driver),
            'memory_mib': memory_mib,
            'unified_memory': unified,
            'uuid': _value(uuid),
        })
    return gpus, malformed


def parse_cuda_version(text):
    """``'CUDA Version: 13.0'`` in the ``nvidia-smi`` (or ``-q``) header -> ``'13.0'``; else None."""
    m = _CUDA_RE.search(text or '')
    return m.group(1) if m else None


def parse_driver_version(text):
    """``'Driver Version: 580.95.05'`` in the ``nvidia-smi`` header -> ``'580.95.05'``; else None."""
    m = _DRIVER_RE.search(text or '')
    return m.group(1) if m else None


def is_no_devices(text):
    """True when nvidia-smi said there is no GPU (its exit code is then non-zero)."""
    return any(marker in (text or '') for marker in NO_DEVICES_MARKERS)


def _agreed(values):
    values = set(values)
    if len(values) == 1:
        return values.pop()
    return None


def gpu_arch(gpus):
    """The ``sm_*`` arch when every GPU has the same known one, else None."""
    if not gpus:
        return None
    return _agreed(g.get('arch') for g in gpus)


def summarize(gpus, header_text=None):
    """Module result from parsed GPUs and the plain ``nvidia-smi`` text (may be None)."""
    driver = _agreed(g.get('driver_version') for g in gpus) if gpus else None
    if driver is None:
        driver = parse_driver_version(header_text)
    return {
        'gpus': gpus,
        'gpu_count': len(gpus),
        'gpu_arch': gpu_arch(gpus),
        'driver_version': driver,
        'cuda_version': parse_cuda_version(header_text),
    }
