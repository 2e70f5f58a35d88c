# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The deploy summary as plain lines: what a person reads after `site.yml` and copies from.

Inputs are plain data so other parts of the collection slot theirs in: node identities (from
/etc/llmfleet/node.json), one dict per endpoint (a serving group's URL, model and layout), the API
key FILE's path on the controller (never the key) and the Ray cluster state.
"""

from __future__ import annotations

import json
import shlex

ENDPOINT_KEYS = ('url', 'model')


class SummaryError(ValueError):
    pass


def node_line(name, node):
    """'spark1: cluster=sim arch=sm_121 fabric=10.231.1.11 ray=head' from a node identity dict."""
    return '%s: cluster=%s arch=%s fabric=%s ray=%s' % (
        name, node.get('cluster', '?'), node.get('gpu_arch', '?'), node.get('fabric_ip', '?'),
        node.get('ray_role', '?'))


def endpoint_line(ep):
    """'Endpoint: URL model NAME engine E backend B nodes N tp T pp P [runtime container]' (unknown fields
    left out), or for the gateway 'Endpoint: URL model NAME gateway for M1, M2' (models: every model it routes to)."""
    missing = [k for k in ENDPOINT_KEYS if not ep.get(k)]
    if missing:
        raise SummaryError('endpoint %r lacks %s' % (ep, ', '.join(missing)))
    parts = ['Endpoint: %s model %s' % (ep['url'], ep['model'])]
    for key in ('engine', 'backend', 'nodes', 'tp', 'pp'):
        if ep.get(key) not in (None, ''):
            parts.append('%s %s' % (key, ep[key]))
    if ep.get('runtime') == 'container':
        # the engine runs inside an image (llmfleet_serve_groups.<group>.runtime); venv is the default, unsaid
        parts.append('runtime container')
    if ep.get('models'):
        # the cluster's gateway (roles/gateway): one URL for every model, routed by the request's model
        parts.append('gateway for %s' % ', '.join(ep['models']))
    return ' '.join(parts)


def _key_expr(api_key_file):
    return '$(cat %s)' % shlex.quote(api_key_file) if api_key_file else '$LLMFLEET_API_KEY'


def curl_line(ep, api_key_file=None, prompt='Hello'):
    """A curl command that works when pasted into a shell on the controller."""
    body = json.dumps({'model': ep['model'], 'messages': [{'role': 'user', 'content': prompt}],
                       'max_tokens': 32})
    return ('curl -s %s/chat/completions -H "Authorization: Bearer %s" '
            "-H 'Content-Type: application/json' -d %s"
            % (ep['url'].rstrip('/'), _key_expr(api_key_file), shlex.quote(body)))


def python_lines(ep, api_key_file=None, prompt='Hello'):
    """A short `openai` client example (pip install openai) as lines of a shell here-document."""
    key = ('open(%r).read().strip()' % api_key_file if api_key_file
           else 'os.environ.get("LLMFLEET_API_KEY", "none")')
    return (["python3 - <<'EOF'"] + ([] if api_key_file else ['import os']) + [
        'from openai import OpenAI',
        'client = OpenAI(base_url=%s, api_key=%s)' % (json.dumps(ep['url'].rstrip('/')), key),
        'r = client.chat.completions.create(model=%s, max_tokens=32,' % json.dumps(ep['model']),
        '    messages=[{"role": "user", "content": %s}])' % json.dumps(prompt),
        'print(r.choices[0].message.content)',
        'EOF',
    ])


def summary_lines(nodes, endpoints, api_key_file=None, ray=None, prometheus_url=None):
    """All summary lines.

    nodes: {host: node identity dict}; endpoints: [{url, model, engine, backend, nodes, tp, pp}], the
    gateway's first where the cluster has one ({url, model, models});
    api_key_file: path on the controller or empty (no key); ray: ray_cluster_info's result or None;
    prometheus_url: the cluster's Prometheus (the monitoring role), or None where it runs none.
    """
    if not isinstance(endpoints, list):
        raise SummaryError('endpoints must be a list of dicts, got %r' % (endpoints,))
    lines = [node_line(h, nodes[h]) for h in sorted(nodes)]
    if ray:
        lines.append('Ray: %s nodes alive (%s), %s CPUs, %s GPUs' % (
            ray.get('node_count'), ', '.join(n.get('ip', '?') for n in ray.get('nodes', [])),
            ray.get('cpus'), ray.get('gpus')))
    lines += [endpoint_line(ep) for ep in endpoints]
    lines.append('API key file: %s' % (api_key_file or 'none (the endpoint takes no key)'))
    if prometheus_url:
        url = prometheus_url.rstrip('/')
        lines.append('Prometheus: %s (targets %s/targets, alerts %s/alerts)' % (url, url, url))
    if endpoints:
        # unindented: the commands work when pasted (a here-document's EOF must start the line)
        lines.append('Try it with curl:')
        lines.append(curl_line(endpoints[0], api_key_file))
        lines.append('Try it with Python (pip install openai):')
        lines += python_lines(endpoints[0], api_key_file)
    return lines
