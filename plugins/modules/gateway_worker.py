#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r'''
---
module: gateway_worker
short_description: Put an engine into the gateway's rotation, or drain it out
version_added: 0.1.0
description:
  - Registers a serving group's API with the cluster's gateway (sglang-router in multi-model mode, roles/gateway) under
    its served model name, or removes it from the rotation and waits for the requests the engine is still working on.
  - With I(state=absent) the router sends no new request to the worker; the module then polls the engine's own
    C(/metrics) (C(vllm:num_requests_running) or C(sglang:num_running_reqs)) until it runs none, up to
    I(drain_timeout) seconds, so that a stop after it cuts no request. A replica is drained this way before it is
    upgraded while the other replicas of its model serve.
  - With I(state=present) it waits until the router lists the worker as healthy.
  - Talks HTTP only (the router's worker API, C(GET/POST/DELETE /workers)); run it where the gateway's port is
    reachable (its host, or the controller).
author:
  - llmfleet maintainers (@llmfleet)
options:
  gateway_url:
    description: The gateway's base URL (C(llmfleet_plan.cluster.gateway.url)), without C(/v1).
    type: str
    required: true
  url:
    description: The engine's API base URL (a serving group's C(url) in the plan).
    type: str
    required: true
  model_id:
    description: The served model name the gateway routes to the worker; required with I(state=present).
    type: str
  state:
    description: C(present) registers the worker (and waits until it is healthy); C(absent) drains it.
    type: str
    choices: [present, absent]
    default: present
  api_key:
    description: The cluster's API key (the router checks it; it is passed on to the engine).
    type: str
    default: ''
  timeout:
    description: Seconds for the router to apply the change (it queues registrations and removals).
    type: int
    default: 60
  drain_timeout:
    description:
      - With I(state=absent), seconds to wait until the engine runs no request; the task fails after them, naming
        the count still running. C(0) does not wait.
    type: int
    default: 600
  poll:
    description: Seconds between polls of the router and of the engine's metrics.
    type: float
    default: 1.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the router's worker list and reports what it would change; changes and waits for nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
'''

EXAMPLES = r'''
- name: Drain replica qwen-2 at the gateway before its upgrade
  llmfleet.cluster.gateway_worker:
    gateway_url: "{{ llmfleet_plan.cluster.gateway.url }}"
    url: http://192.168.100.12:8000
    state: absent
    api_key: "{{ lookup('llmfleet.cluster.api_key', llmfleet_plan.cluster.name) }}"
  delegate_to: localhost

- name: Put it back
  llmfleet.cluster.gateway_worker:
    gateway_url: "{{ llmfleet_plan.cluster.gateway.url }}"
    url: http://192.168.100.12:8000
    model_id: qwen3.5-122b
    api_key: "{{ lookup('llmfleet.cluster.api_key', llmfleet_plan.cluster.name) }}"
  delegate_to: localhost
'''

RETURN = r'''
change:
  description: What was (or, in check mode, would be) done - C(add), C(remove), C(readd) (another model id), or empty.
  type: str
  returned: always
workers:
  description: The router's workers after the change (C(url), C(model_id), C(healthy), C(load)).
  type: list
  elements: dict
  returned: always
running:
  description:
    - With I(state=absent), the requests the engine was still running at the end (C(0) once drained); C(null) when
      its metrics could not be read or name no running-requests gauge.
  type: float
  returned: always
drained_s:
  description: Seconds the drain waited for running requests.
  type: float
  returned: always
'''

import json
import time
from urllib.error import HTTPError, URLError
from urllib.parse import quote

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.llmfleet.cluster.plugins.module_utils import _gateway_workers as gw


def _call(module, method, url, body=None):
    p = module.params
    headers = {'Authorization': 'Bearer ' + p['api_key']} if p['api_key'] else {}
    if body is not None:
        headers['Content-Type'] = 'application/json'
    resp = open_url(url, method=method, data=json.dumps(body) if body is not None else None, headers=headers,
                    timeout=max(5, min(p['timeout'], 60)))
    return resp.read()


def _workers(module):
    try:
        return gw.workers(json.loads(_call(module, 'GET', module.params['gateway_url'] + '/workers')))
    except (HTTPError, URLError, OSError, ValueError) as exc:
        module.fail_json(msg='%s: could not read the gateway\'s workers (GET /workers): %s; fix: check that the '
                             'gateway runs (systemctl status llmfleet-gateway on its host) and the API key'
                         % (module.params['gateway_url'], exc))


def _until(module, done, what):
    """Poll the router until done(workers); fail after timeout naming what did not happen."""
    deadline = time.monotonic() + module.params['timeout']
    while True:
        current = _workers(module)
        if done(current):
            return current
        if time.monotonic() > deadline:
            listed = [w['url'] for w in current] or 'no worker'
            module.fail_json(msg='%s: %s within %d s (the router lists %s); fix: the gateway\'s journal (journalctl -u '
                                 'llmfleet-gateway)' % (module.params['gateway_url'], what, module.params['timeout'], listed))
        time.sleep(module.params['poll'])


def _running(module):
    try:
        return gw.running_requests(_call(module, 'GET', module.params['url'] + '/metrics').decode('utf-8', 'replace'))
    except (HTTPError, URLError, OSError):
        return None


def _drain(module):
    """Wait until the engine runs no request: (running at the end, seconds waited)."""
    p = module.params
    t0 = time.monotonic()
    running = _running(module)
    while running and p['drain_timeout'] > 0:
        if time.monotonic() - t0 > p['drain_timeout']:
            module.fail_json(msg='%s still runs %g request(s) %d s after the gateway stopped sending to it; fix: raise '
                                 'drain_timeout, or stop it anyway (its clients see the cut requests)'
                             % (p['url'], float(running), p['drain_timeout']), running=running)
        time.sleep(p['poll'])
        running = _running(module)
    return running, round(time.monotonic() - t0, 2)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gateway_url=dict(type='str', required=True),
            url=dict(type='str', required=True),
            model_id=dict(type='str'),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            api_key=dict(type='str', default='', no_log=True),
            timeout=dict(type='int', default=60),
            drain_timeout=dict(type='int', default=600),
            poll=dict(type='float', default=1.0),
        ),
        required_if=[('state', 'present', ['model_id'])],
        supports_check_mode=True,
    )
    p = module.params
    p['gateway_url'] = gw.base_url(p['gateway_url'])
    p['url'] = gw.base_url(p['url'])
    current = _workers(module)
    action = gw.change(current, p['url'], p['model_id'], p['state'])
    result = dict(changed=bool(action), change=action, workers=current, running=None, drained_s=0.0)
    if module.check_mode:
        module.exit_json(**result)
    worker_path = p['gateway_url'] + '/workers/' + quote(p['url'], safe='')
    try:
        if action in ('remove', 'readd'):
            _call(module, 'DELETE', worker_path)
            current = _until(module, lambda ws: gw.change(ws, p['url'], None, 'absent') == '',
                             'the router did not drop %s' % p['url'])
        if action in ('add', 'readd'):
            _call(module, 'POST', p['gateway_url'] + '/workers',
                  {'url': p['url'], 'model_id': p['model_id'], 'api_key': p['api_key']})
            current = _until(module, lambda ws: gw.registered(ws, p['url'], p['model_id']),
                             '%s (%s) did not become a healthy worker' % (p['url'], p['model_id']))
    except HTTPError as exc:
        module.fail_json(msg='%s: the gateway refused the change of %s: HTTP %d %s' % (
            p['gateway_url'], p['url'], exc.code, exc.read().decode('utf-8', 'replace')[:300]))
    if p['state'] == 'absent':
        result['running'], result['drained_s'] = _drain(module)
    result['workers'] = current
    module.exit_json(**result)


if __name__ == '__main__':
    main()
