#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r'''
---
module: serve_smoke
short_description: Completions through an OpenAI-compatible endpoint, with their latency
version_added: 0.1.0
description:
  - Lists the models of an OpenAI-compatible endpoint (vLLM / SGLang C(/v1/models)), then sends I(requests)
    chat completions of I(max_tokens) tokens one after the other and measures each one's latency.
  - Meant to run where the users are (the controller, with C(delegate_to) C(localhost)), so it tests the API the way
    clients reach it.
  - Never fails on a bad endpoint; RV(ok), RV(error) and the latencies say what happened (the caller decides).
  - A server with a reasoning parser returns the model's thinking as C(reasoning) / C(reasoning_content), not
    C(content); a reasoning model cut off by I(max_tokens) returns no content at all. Both count as output and
    come back apart, as RV(reasoning) and RV(text).
author:
  - llmfleet maintainers (@llmfleet)
options:
  url:
    description: Base URL of the endpoint, without C(/v1).
    type: str
    required: true
  model:
    description: Served model name to request.
    type: str
    required: true
  api_key:
    description: Bearer key, when the server enforces one.
    type: str
    default: ''
  requests:
    description: Completions to send (sequentially).
    type: int
    default: 3
  max_tokens:
    description: Tokens per completion.
    type: int
    default: 16
  prompt:
    description: User message.
    type: str
    default: Say hello in five words.
  timeout:
    description: Seconds per request.
    type: int
    default: 120
  stream:
    description:
      - "Also send one streamed chat completion (C(stream=true), server-sent events) and require at least one
        output chunk (content or reasoning) and the closing C(data: [DONE])."
    type: bool
    default: false
extends_documentation_fragment:
  - llmfleet.cluster.attributes.read_only
'''

EXAMPLES = r'''
- name: Three completions from the controller
  llmfleet.cluster.serve_smoke:
    url: http://10.0.0.25:8000
    model: nemotron-3-super
    api_key: "{{ vault_api_key }}"
  delegate_to: localhost
  register: smoke
'''

RETURN = r'''
ok:
  description: The model is listed and every completion returned tokens.
  type: bool
  returned: always
models:
  description: Model ids C(/v1/models) listed.
  type: list
  elements: str
  returned: always
latencies_s:
  description: Seconds of each completion.
  type: list
  elements: float
  returned: always
p50_s:
  description: Median latency.
  type: float
  returned: always
max_s:
  description: Slowest completion.
  type: float
  returned: always
completion_tokens:
  description: Tokens of each completion.
  type: list
  elements: int
  returned: always
tokens_per_s:
  description: Completion tokens per second of the median request.
  type: float
  returned: always
text:
  description: The first completion's answer (C(message.content)).
  type: str
  returned: always
reasoning:
  description: The first completion's reasoning (C(message.reasoning) or C(reasoning_content)); empty without a reasoning parser.
  type: str
  returned: always
stream:
  description:
    - The streamed completion when I(stream) - C(content_chunks), C(reasoning_chunks), C(done) (C([DONE]) seen),
      C(first_chunk_s) (first chunk of either kind), C(text), C(reasoning); else empty.
  type: dict
  returned: always
error:
  description: What failed; empty when everything worked.
  type: str
  returned: always
'''

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.llmfleet.cluster.plugins.module_utils import chat_output, collective


def stream_once(base, headers, p):
    """One streamed chat completion: ({content_chunks, reasoning_chunks, done, first_chunk_s, text, reasoning}, error or '')."""
    body = json.dumps({'model': p['model'], 'max_tokens': p['max_tokens'], 'temperature': 0, 'stream': True,
                       'messages': [{'role': 'user', 'content': p['prompt']}]})
    out = {'content_chunks': 0, 'reasoning_chunks': 0, 'done': False, 'first_chunk_s': None, 'text': '', 'reasoning': ''}
    t0 = time.monotonic()
    try:
        resp = open_url(base + '/v1/chat/completions', data=body, headers=headers, method='POST', timeout=p['timeout'])
        for raw in resp:
            line = raw.decode('utf-8', 'replace').strip()
            if not line.startswith('data:'):
                continue
            data = line[len('data:'):].strip()
            if data == '[DONE]':
                out['done'] = True
                break
            reasoning, content = chat_output.parts(chat_output.first_choice(json.loads(data), 'delta'))
            out['reasoning_chunks'] += 1 if reasoning else 0
            out['content_chunks'] += 1 if content else 0
            out['reasoning'] += reasoning
            out['text'] += content
            if out['first_chunk_s'] is None and chat_output.has_output(reasoning, content):
                out['first_chunk_s'] = round(time.monotonic() - t0, 3)
    except Exception as exc:  # pylint: disable=broad-except
        return out, 'POST %s/v1/chat/completions (stream): %s' % (base, exc)
    if not out['content_chunks'] and not out['reasoning_chunks']:
        return out, 'the streamed completion sent no content or reasoning chunk'
    if not out['done']:
        return out, 'the streamed completion ended without data: [DONE]'
    return out, ''


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type='str', required=True),
            model=dict(type='str', required=True),
            api_key=dict(type='str', default='', no_log=True),
            requests=dict(type='int', default=3),
            max_tokens=dict(type='int', default=16, no_log=False),
            prompt=dict(type='str', default='Say hello in five words.'),
            timeout=dict(type='int', default=120),
            stream=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    base = p['url'].rstrip('/')
    headers = {'Content-Type': 'application/json'}
    if p['api_key']:
        headers['Authorization'] = 'Bearer ' + p['api_key']
    res = dict(changed=False, ok=False, models=[], latencies_s=[], completion_tokens=[], text='', reasoning='', error='',
               p50_s=None, max_s=None, tokens_per_s=None, stream={})
    try:
        doc = json.loads(open_url(base + '/v1/models', headers=headers, timeout=p['timeout']).read())
        res['models'] = [m.get('id') for m in doc.get('data') or []]
    except Exception as exc:  # pylint: disable=broad-except
        res['error'] = 'GET %s/v1/models: %s' % (base, exc)
        module.exit_json(**res)
    if p['model'] not in res['models']:
        res['error'] = 'model %r is not served at %s (models: %s)' % (p['model'], base, ', '.join(res['models']) or 'none')
        module.exit_json(**res)
    body = json.dumps({'model': p['model'], 'max_tokens': p['max_tokens'], 'temperature': 0,
                       'messages': [{'role': 'user', 'content': p['prompt']}]})
    for _i in range(max(1, p['requests'])):
        t0 = time.monotonic()
        try:
            doc = json.loads(open_url(base + '/v1/chat/completions', data=body, headers=headers, method='POST',
                                      timeout=p['timeout']).read())
        except Exception as exc:  # pylint: disable=broad-except
            res['error'] = 'POST %s/v1/chat/completions: %s' % (base, exc)
            break
        res['latencies_s'].append(round(time.monotonic() - t0, 3))
        res['completion_tokens'].append(int((doc.get('usage') or {}).get('completion_tokens') or 0))
        if len(res['latencies_s']) == 1:
            res['reasoning'], res['text'] = chat_output.parts(chat_output.first_choice(doc, 'message'))
    if res['latencies_s']:
        res['p50_s'] = round(collective.median(res['latencies_s']), 3)
        res['max_s'] = max(res['latencies_s'])
        toks = collective.median(res['completion_tokens']) or 0
        res['tokens_per_s'] = round(toks / res['p50_s'], 2) if res['p50_s'] else None
    if not res['error'] and not all(res['completion_tokens']):
        res['error'] = 'a completion returned no tokens'
    if p['stream'] and not res['error']:
        res['stream'], res['error'] = stream_once(base, headers, p)
    res['ok'] = not res['error']
    module.exit_json(**res)


if __name__ == '__main__':
    main()
