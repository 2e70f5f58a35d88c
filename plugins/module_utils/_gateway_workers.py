# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The gateway's worker list and an engine's running requests (private to the gateway_worker module).

Pure, no I/O. The shapes are sglang-router 0.2.4's (``GET /workers``, multi-model mode) and the
engines' Prometheus text (vLLM ``vllm:num_requests_running``, SGLang ``sglang:num_running_reqs``),
as tests/unit/plugins/module_utils/test_gateway_workers.py records them.
"""

import re

# The gauge of requests an engine is working on, by engine (their /metrics, text format).
RUNNING_GAUGES = ('vllm:num_requests_running', 'sglang:num_running_reqs', 'sglang_num_running_reqs')
_SAMPLE = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(?P<value>[-+0-9.eEnaNIf]+)')


class GatewayWorkersError(ValueError):
    """The router's answer is not the worker list this module knows."""


def workers(doc):
    """[{url, model_id, healthy, load}] of a ``GET /workers`` document."""
    rows = doc.get('workers') if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise GatewayWorkersError('GET /workers: expected {"workers": [...]}, got %r' % (doc,))
    return [{'url': str(w.get('url') or w.get('id') or ''), 'model_id': w.get('model_id'),
             'healthy': bool(w.get('is_healthy')), 'load': w.get('load')} for w in rows if isinstance(w, dict)]


def base_url(url):
    """An API URL as the router lists it: no trailing slash, no /v1."""
    url = str(url).rstrip('/')
    return url[:-3] if url.endswith('/v1') else url


def _same(a, b):
    return base_url(a) == base_url(b)


def registered(current, url, model_id):
    """Whether the router lists `url` as a healthy worker of `model_id`."""
    return any(_same(w['url'], url) and w['model_id'] == model_id and w['healthy'] for w in current)


def change(current, url, model_id, state):
    """What the module must do for `url` given the router's workers: 'add', 'remove' or '' (nothing).
    A worker registered under another model id is re-registered ('readd')."""
    found = [w for w in current if _same(w['url'], url)]
    if state == 'absent':
        return 'remove' if found else ''
    if not found:
        return 'add'
    return 'readd' if model_id and found[0]['model_id'] != model_id else ''


def running_requests(metrics_text):
    """The sum of the engine's running-requests gauge over its series, or None when it exports none."""
    total, seen = 0.0, False
    for line in (metrics_text or '').splitlines():
        m = _SAMPLE.match(line)
        if m and m.group('name') in RUNNING_GAUGES:
            try:
                total += float(m.group('value'))
            except ValueError:
                continue
            seen = True
    return total if seen else None
