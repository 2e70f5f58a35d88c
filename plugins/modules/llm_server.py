#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

DOCUMENTATION = r'''
---
module: llm_server
short_description: One engine process of a served model (vLLM or SGLang) as a managed systemd unit
version_added: 0.1.0
description:
  - Renders C(/etc/systemd/system/<name>.service) and its env file from an argv and an environment, stamps
    the unit with a hash of argv + env + release, and starts, restarts, stops or removes it.
  - A changed hash restarts the engine (after draining running requests); an unchanged one is a no-op.
  - With I(health_url) (the API node) it waits for C(/health) and for C(/v1/models) to list the served
    name, fails at once with the journal's last lines when the process dies during load, and sends one
    smoke chat completion.
  - Secrets (I(secret_env), e.g. C(VLLM_API_KEY)) go only into the 0600 env file.
author:
  - llmfleet maintainers (@llmfleet)
options:
  name:
    description: Unit name (without C(.service)).
    type: str
    required: true
  state:
    description: Desired state of the unit.
    type: str
    choices: [started, stopped, restarted, absent]
    default: started
  argv:
    description: Engine command line. Required for I(state=started) and I(state=restarted).
    type: list
    elements: str
    default: []
  env:
    description: Environment of the engine (non-secret).
    type: dict
    default: {}
  secret_env:
    description: Secret environment (API key, HF token); written to the 0600 env file only.
    type: dict
    default: {}
  env_files:
    description: Further EnvironmentFile= lines loaded before the unit's own file (host comm env, ...).
    type: list
    elements: str
    default: []
  release:
    description: Release the engine runs from; part of the hash so an upgrade restarts it.
    type: str
    default: ''
  group_hash:
    description:
      - Hash of the whole serving group's commands. Part of this unit's hash, so a change on any node
        of a multi-node engine restarts every node (their ranks must rendezvous again together).
    type: str
    default: ''
  user:
    description: Service user.
    type: str
    default: llmfleet
  group:
    description: Service group.
    type: str
    default: llmfleet
  workdir:
    description: Working directory (writable by the service).
    type: path
    default: /var/lib/llmfleet
  description:
    description: Unit description.
    type: str
    default: llmfleet engine
  memory_max:
    description: C(MemoryMax=) of the unit (empty = none).
    type: str
    default: ''
  stop_timeout:
    description:
      - C(TimeoutStopSec=) of the unit, seconds. Bounds each phase of a stop (SIGTERM, then SIGKILL of
        whatever is left of the unit's processes).
    type: int
    default: 60
  limit_nofile:
    description:
      - C(LimitNOFILE=) of the unit. A value above the service manager's hard limit fails the unit
        at exec (status 205/LIMITS); see O(limits_from_pid1).
    type: int
    default: 20000
  limit_memlock:
    description:
      - C(LimitMEMLOCK=) of the unit (C(infinity) or bytes), since RDMA/RoCE registers NCCL's buffers.
        A higher one than PID 1's hard limit fails at exec (205/LIMITS); see O(limits_from_pid1).
    type: str
    default: infinity
  limits_from_pid1:
    description:
      - Lower O(limit_nofile) and O(limit_memlock) to the hard limits of PID 1 (the service manager,
        read from C(/proc/1/limits)) where those are lower, since a unit asking for more fails at
        exec (205/LIMITS in a container). An unreadable C(/proc/1/limits) leaves them as given.
      - RV(limit_nofile) and RV(limit_memlock) return what the unit got.
    type: bool
    default: false
  hardening:
    description: Add the systemd sandboxing options (not to a O(container) unit, whose engine sandboxes it).
    type: bool
    default: true
  container:
    description:
      - Run O(argv) inside a container image instead of on the node (the C(container) runtime). The unit
        runs the container engine in the foreground as root; the engine process inside runs as O(user)'s
        uid and gid, on the host network and IPC, memlock unlimited.
      - The container's process limit is the service manager's hard one (C(/proc/1/limits)) where that is
        finite, since a container engine's own default may be above it and its runtime cannot raise to that.
      - The unit's environment reaches the container by name (C(--env NAME)), so values never appear in argv.
      - The image reference is part of the unit's hash, so a new digest restarts the engine and the same
        one leaves it running.
    type: dict
    suboptions:
      engine:
        description: The container engine's executable (C(podman) or C(docker), a name or a path).
        type: str
        default: podman
      image:
        description:
          - The image, pinned by digest (C(name@sha256:<64 hex>)) or a local image ID (C(sha256:<64 hex>)).
          - It must be present on the node (pulled or loaded before); the module fails naming it otherwise.
        type: str
        required: true
      mounts:
        description: Further C(--volume) arguments (C(src:dst[:ro])), e.g. the model directory read-only.
        type: list
        elements: str
        default: []
      devices:
        description: C(--device) arguments (C(/dev/infiniband) where RDMA is up).
        type: list
        elements: str
        default: []
      gpus:
        description: Give the container every GPU (NVIDIA container toolkit).
        type: bool
        default: false
  health_url:
    description: Base URL of the API (C(http://ip:port)) on the API node; empty on headless nodes.
    type: str
    default: ''
  served_model_name:
    description: Name C(/v1/models) must list before the server counts as ready.
    type: str
    default: ''
  api_key:
    description: Bearer key for the probes, when the server enforces one.
    type: str
    default: ''
  timeout:
    description: Seconds to wait for health (large models load for many minutes).
    type: int
    default: 1800
  drain_timeout:
    description: Seconds to wait for running requests to finish before a stop or restart.
    type: int
    default: 120
  kill_on_stop:
    description:
      - With O(state=stopped), send SIGKILL to every process of the unit, then stop it.
      - For a rank that serves no API (nothing to drain) stopped after its API rank, whose engine's own
        shutdown waits for workers that wait for that API rank (vLLM's headless rank sends its workers
        SIGTERM after 5 s and SIGKILL after 4 more; the stop took the unit's 10 s timeout on the sim).
    type: bool
    default: false
  smoke:
    description: Send one chat completion after the server is ready.
    type: bool
    default: true
  smoke_prompt:
    description: The smoke completion's user message.
    type: str
    default: Say hello.
  smoke_expect:
    description:
      - Text the smoke answer (content or reasoning) must contain, e.g. C(Paris) for a question with a known
        answer; the module fails naming the answer when it does not. Empty checks nothing but that it answers.
    type: str
    default: ''
  unit_dir:
    description: Directory of unit files.
    type: path
    default: /etc/systemd/system
  env_dir:
    description: Directory of the unit's env file.
    type: path
    default: /etc/llmfleet
attributes:
  check_mode:
    support: full
    description: Reports whether the unit would change, restart or start; touches nothing.
  diff_mode:
    support: full
    description: Shows the unit file before and after.
  platform:
    support: full
    platforms: posix
    description: Linux with systemd.
'''

EXAMPLES = r'''
- name: Serve the API node (rank 0)
  llmfleet.cluster.llm_server:
    name: llmfleet-serve-tiny-llama
    argv: [/opt/llmfleet/venvs/current/bin/vllm, serve, /opt/llmfleet/models/tiny-llama, --port, "8000"]
    env_files: [/etc/llmfleet/comm.env, /etc/llmfleet/engine.env]
    secret_env: {VLLM_API_KEY: "{{ lookup('llmfleet.cluster.api_key', llmfleet_plan.cluster.name) }}"}
    release: sim-vllm-0.32.0-cpu
    health_url: http://10.231.1.11:8000
    served_model_name: tiny-llama
    api_key: "{{ lookup('llmfleet.cluster.api_key', llmfleet_plan.cluster.name) }}"

- name: Serve the same engine from a container image pinned by digest (the container runtime)
  llmfleet.cluster.llm_server:
    name: llmfleet-serve-smollm2
    argv: [/opt/llmfleet/venvs/current/bin/vllm, serve, /opt/llmfleet/models/smollm2, --port, "8000"]
    env_files: [/etc/llmfleet/comm.env]
    secret_env: {VLLM_API_KEY: "{{ lookup('llmfleet.cluster.api_key', llmfleet_plan.cluster.name) }}"}
    container:
      engine: podman
      image: localhost/llmfleet-engine@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945
      mounts: [/opt/llmfleet/models:/opt/llmfleet/models:ro]
    health_url: http://10.231.1.16:8000
    served_model_name: smollm2
    api_key: "{{ lookup('llmfleet.cluster.api_key', llmfleet_plan.cluster.name) }}"
'''

RETURN = r'''
unit:
  description: Path of the unit file.
  type: str
  returned: always
hash:
  description: Hash of argv + env + release of the desired engine.
  type: str
  returned: always
restarted:
  description: Whether the engine was (re)started by this run.
  type: bool
  returned: always
running:
  description:
    - Whether the unit ran before this call (active, activating - a crash loop between restarts included -,
      reloading or deactivating); in check mode too, so that a caller can skip stopping a group none of
      whose ranks runs.
  type: bool
  returned: when O(state) is V(started) or V(restarted)
limit_nofile:
  description: C(LimitNOFILE=) of the unit (after O(limits_from_pid1)).
  type: int
  returned: always
  sample: 20000
limit_memlock:
  description: C(LimitMEMLOCK=) of the unit (after O(limits_from_pid1)).
  type: str
  returned: always
  sample: infinity
healthy_after:
  description: Seconds from (re)start to ready; 0 when nothing was started.
  type: float
  returned: when health_url is set
models:
  description: Model ids C(/v1/models) listed.
  type: list
  elements: str
  returned: when health_url is set
smoke:
  description: The smoke completion's answer (C(text)), reasoning (C(reasoning), behind a reasoning parser), tokens and latency.
  type: dict
  returned: when smoke ran
drained:
  description: The most requests seen in flight (running or queued) before the stop/restart, and seconds waited.
  type: dict
  returned: when a running engine was stopped or restarted
'''

import grp
import json
import os
import pwd
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.llmfleet.cluster.plugins.module_utils import chat_output, raynet, serve_unit


# The service manager's limits: a unit asking above its hard limits fails at exec.
PID1_LIMITS = '/proc/1/limits'

# 'activating' is also a crash loop's wait between restarts (SubState auto-restart): a unit there
# has no process now but starts its old argv when the timer fires, so it counts as running (an old
# API rank that came back while the headless ranks restarted joined them into its doomed session:
# seen in CI after a failed load)
RUNNING_STATES = ('active', 'activating', 'reloading', 'deactivating')


class Server:
    def __init__(self, module):
        self.m = module
        self.p = module.params
        self.unit = os.path.join(self.p['unit_dir'], self.p['name'] + '.service')
        self.env_path = os.path.join(self.p['env_dir'], self.p['name'] + '.env')
        # check mode renders and compares files only: a host without systemd (the GPU test VMs,
        # tests/gpu/README.md) still gets the unit the collection would install
        self.systemctl = module.get_bin_path('systemctl', required=not module.check_mode)

    # ------------------------------------------------------------------ systemd
    def ctl(self, *args, check=True):
        if self.systemctl is None:  # check mode without systemd: no unit is known to it
            return 1, ''
        rc, out, err = self.m.run_command([self.systemctl] + list(args))
        if check and rc != 0:
            self.m.fail_json(msg='systemctl %s failed: %s' % (' '.join(args), err.strip()), **self.journal_result())
        return rc, out.strip()

    def prop(self, name):
        return self.ctl('show', '-p', name, '--value', self.p['name'] + '.service', check=False)[1]

    def active(self):
        return self.prop('ActiveState') == 'active'

    def running(self):
        return self.prop('ActiveState') in RUNNING_STATES

    def journal_result(self):
        jc = self.m.get_bin_path('journalctl')
        if not jc:
            return {}
        rc, out, err = self.m.run_command([jc, '-u', self.p['name'] + '.service', '-n', '40', '--no-pager', '-o', 'cat'])
        return {'journal': out.splitlines()[-40:]}

    # ------------------------------------------------------------------ http
    def get(self, path, timeout=5):
        headers = {'Authorization': 'Bearer ' + self.p['api_key']} if self.p['api_key'] else {}
        r = open_url(self.p['health_url'].rstrip('/') + path, headers=headers, timeout=timeout)
        return r.getcode(), r.read().decode('utf-8', 'replace')

    def ready(self):
        try:
            code, _body = self.get('/health')
            if code != 200:
                return False, []
            code, body = self.get('/v1/models')
            ids = [m.get('id') for m in json.loads(body).get('data', [])]
            return (not self.p['served_model_name'] or self.p['served_model_name'] in ids), ids
        except Exception:  # noqa: BLE001 - not up yet is any connection error
            return False, []

    def wait_ready(self, started_at, restarts_before):
        deadline = started_at + self.p['timeout']
        while time.time() < deadline:
            ok, ids = self.ready()
            if ok:
                return time.time() - started_at, ids
            state = self.prop('ActiveState')
            restarts = self.prop('NRestarts')
            if state in ('failed', 'inactive') or (restarts_before is not None and restarts != restarts_before):
                self.m.fail_json(msg='%s died while loading (state %s, restarts %s); its journal follows'
                                 % (self.p['name'], state, restarts), **self.journal_result())
            time.sleep(2)
        self.m.fail_json(msg='%s not ready at %s within %ss' % (self.p['name'], self.p['health_url'], self.p['timeout']),
                         **self.journal_result())

    def drain(self):
        if not self.p['health_url'] or not self.active():
            return {'running': 0, 'waited': 0.0}
        t0 = time.time()
        seen = 0.0
        while time.time() - t0 < self.p['drain_timeout']:
            try:
                running = serve_unit.running_requests(self.get('/metrics')[1])
            except Exception:  # noqa: BLE001 - a server that does not answer has nothing to drain
                running = None
            if not running:
                break
            seen = max(seen, running)
            time.sleep(1)
        return {'running': seen, 'waited': round(time.time() - t0, 1)}

    def smoke(self):
        # a known answer needs room for its sentence ("The capital of France is Paris." is 8 tokens)
        body = json.dumps({'model': self.p['served_model_name'], 'max_tokens': 16 if self.p['smoke_expect'] else 8,
                           'temperature': 0, 'messages': [{'role': 'user', 'content': self.p['smoke_prompt']}]})
        headers = {'Content-Type': 'application/json'}
        if self.p['api_key']:
            headers['Authorization'] = 'Bearer ' + self.p['api_key']
        t0 = time.time()
        try:
            r = open_url(self.p['health_url'].rstrip('/') + '/v1/chat/completions', data=body, headers=headers,
                         method='POST', timeout=300)
            doc = json.loads(r.read())
        except Exception as exc:  # noqa: BLE001
            self.m.fail_json(msg='smoke completion failed: %s' % exc, **self.journal_result())
        # behind a reasoning parser a short answer is all reasoning and content is null
        reasoning, text = chat_output.parts(chat_output.first_choice(doc, 'message'))
        expect = self.p['smoke_expect']
        if expect and expect not in '%s %s' % (text or '', reasoning or ''):
            self.m.fail_json(msg='smoke completion: asked %r, the answer %r does not contain %r (the profile\'s smoke.expect): '
                                 'the model serves, but not as it should (weights, tokenizer or chat template)'
                                 % (self.p['smoke_prompt'], text or reasoning, expect), **self.journal_result())
        return {'text': text, 'reasoning': reasoning, 'latency_s': round(time.time() - t0, 2),
                'completion_tokens': (doc.get('usage') or {}).get('completion_tokens')}

    # ------------------------------------------------------------------ files
    def container_argv(self, limit_nofile, limit_memlock, limit_nproc=None):
        """The container engine's command line for the unit; fails naming the image when the node lacks it."""
        p, c = self.p, self.p['container']
        # check mode may name an image a run would build or pull first by its reference
        if not serve_unit.image_digest(c['image']) and not self.m.check_mode:
            self.m.fail_json(msg='%s: container image %r is not pinned by digest: name it as name@sha256:<64 hex> '
                                 '(podman/docker image inspect --format {{.Digest}}) or by its image ID'
                                 % (p['name'], c['image']))
        # in check mode the engine and the image may be what earlier tasks would have installed
        engine = self.m.get_bin_path(c['engine'], required=not self.m.check_mode) or c['engine']
        rc, err = 0, ''
        if os.path.isabs(engine):
            rc, _out, err = self.m.run_command([engine, 'image', 'inspect', '--format', '{{.Id}}', c['image']])
        if rc != 0 and not self.m.check_mode:
            self.m.fail_json(msg='%s: container image %s is not on this node (%s): load or pull it first '
                                 '(the container_image tasks of the serve role)' % (p['name'], c['image'], err.strip()))
        names = []
        for path in p['env_files']:
            text = self.read(path.lstrip('-'))
            names += [n for n in serve_unit.env_names(text) if n not in names]
        names += [n for n in sorted(dict(p['env'], **p['secret_env'])) if n not in names]
        try:
            ids = '%d:%d' % (pwd.getpwnam(p['user']).pw_uid, grp.getgrnam(p['group']).gr_gid)
        except KeyError as exc:
            self.m.fail_json(msg='%s: the service user or group is missing on this node: %s' % (p['name'], exc))
        return serve_unit.container_argv(p['name'], p['argv'], dict(c, engine=engine), names, ids, p['workdir'],
                                         limit_nofile, limit_memlock, limit_nproc)

    def read(self, path):
        try:
            with open(path) as f:
                return f.read()
        except IOError:
            return None

    def write(self, path, text, mode):
        tmp = path + '.llmfleet-tmp'
        with open(tmp, 'w') as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.rename(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type='str', required=True),
            state=dict(type='str', default='started', choices=['started', 'stopped', 'restarted', 'absent']),
            argv=dict(type='list', elements='str', default=[]),
            env=dict(type='dict', default={}),
            secret_env=dict(type='dict', default={}, no_log=True),
            env_files=dict(type='list', elements='str', default=[]),
            release=dict(type='str', default=''),
            group_hash=dict(type='str', default=''),
            user=dict(type='str', default='llmfleet'),
            group=dict(type='str', default='llmfleet'),
            workdir=dict(type='path', default='/var/lib/llmfleet'),
            description=dict(type='str', default='llmfleet engine'),
            memory_max=dict(type='str', default=''),
            limit_nofile=dict(type='int', default=20000),
            limit_memlock=dict(type='str', default='infinity'),
            limits_from_pid1=dict(type='bool', default=False),
            stop_timeout=dict(type='int', default=60),
            hardening=dict(type='bool', default=True),
            container=dict(type='dict', options=dict(
                engine=dict(type='str', default='podman'),
                image=dict(type='str', required=True),
                mounts=dict(type='list', elements='str', default=[]),
                devices=dict(type='list', elements='str', default=[]),
                gpus=dict(type='bool', default=False),
            )),
            health_url=dict(type='str', default=''),
            served_model_name=dict(type='str', default=''),
            api_key=dict(type='str', default='', no_log=True),
            timeout=dict(type='int', default=1800),
            drain_timeout=dict(type='int', default=120),
            kill_on_stop=dict(type='bool', default=False),
            smoke=dict(type='bool', default=True),
            smoke_prompt=dict(type='str', default='Say hello.'),
            smoke_expect=dict(type='str', default=''),
            unit_dir=dict(type='path', default='/etc/systemd/system'),
            env_dir=dict(type='path', default='/etc/llmfleet'),
        ),
        required_if=[('state', 'started', ('argv',)), ('state', 'restarted', ('argv',))],
        supports_check_mode=True,
    )
    p = module.params
    s = Server(module)
    limit_nofile, limit_memlock = p['limit_nofile'], p['limit_memlock']
    pid1 = s.read(PID1_LIMITS) or ''  # read once: the unit's limits and a container's process limit
    if p['limits_from_pid1']:
        limit_nofile = raynet.clamp_nofile(limit_nofile, pid1)
        limit_memlock = raynet.clamp_memlock(limit_memlock, pid1)
    argv, user, group, hardening = p['argv'], p['user'], p['group'], p['hardening']
    if p['container'] and p['state'] in ('started', 'restarted'):
        argv = s.container_argv(limit_nofile, limit_memlock, raynet.hard_nproc(pid1))
        # the container engine needs root; the engine inside runs as the service user (container_argv)
        user, group, hardening = 'root', 'root', False
    digest = serve_unit.serve_hash(argv, p['env'], p['release'] + '/' + p['group_hash'], p['secret_env'])
    unit_text = serve_unit.render_unit(
        p['name'], argv, user, group, p['env_files'] + [s.env_path], p['workdir'],
        p['description'], digest, memory_max=p['memory_max'], hardening=hardening,
        limit_nofile=limit_nofile, limit_memlock=limit_memlock, kill_timeout=p['stop_timeout'])
    try:
        env_text = serve_unit.render_env(dict(p['env'], **p['secret_env']))
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    before = s.read(s.unit)
    result = dict(changed=False, unit=s.unit, hash=digest, restarted=False,
                  limit_nofile=limit_nofile, limit_memlock=limit_memlock,
                  diff={'before': before or '', 'after': unit_text if p['state'] != 'absent' else '',
                        'before_header': s.unit, 'after_header': s.unit})

    if p['state'] == 'absent':
        if before is None and s.read(s.env_path) is None:
            module.exit_json(**result)
        result['changed'] = True
        if not module.check_mode:
            result['drained'] = s.drain()
            s.ctl('disable', '--now', p['name'] + '.service', check=False)
            for path in (s.unit, s.env_path):
                if os.path.exists(path):
                    os.remove(path)
            s.ctl('daemon-reload')
        module.exit_json(**result)

    if p['state'] == 'stopped':
        if before is not None and s.running():
            result['changed'] = True
            if not module.check_mode:
                result['drained'] = s.drain()
                if p['kill_on_stop']:
                    # a unit between crash-loop restarts has no process: nothing to kill, not an error
                    s.ctl('kill', '--kill-whom=all', '--signal=SIGKILL', p['name'] + '.service', check=False)
                s.ctl('stop', p['name'] + '.service')
        module.exit_json(**result)

    changed_files = before != unit_text or s.read(s.env_path) != env_text
    state_before = s.prop('ActiveState') if before is not None else ''
    was_active = state_before == 'active'
    # a unit between crash-loop restarts is restarted, not started: systemd queues a start job
    # there behind the restart holdoff (RestartSec), a restart runs now
    was_running = state_before in RUNNING_STATES
    result['running'] = was_running
    need_start = changed_files or not was_active or p['state'] == 'restarted'
    result['changed'] = need_start or s.prop('UnitFileState') != 'enabled'
    if module.check_mode:
        result['restarted'] = need_start
        module.exit_json(**result)
    if changed_files:
        os.makedirs(p['env_dir'], exist_ok=True)
        s.write(s.env_path, env_text, 0o600)
        s.write(s.unit, unit_text, 0o644)
        s.ctl('daemon-reload')
    s.ctl('enable', p['name'] + '.service')
    started_at = time.time()
    if need_start:
        if was_active:
            result['drained'] = s.drain()
        started_at = time.time()
        s.ctl('restart' if was_running else 'start', p['name'] + '.service')
        # a manual (re)start resets NRestarts: read it after, so only automatic restarts count
        restarts = s.prop('NRestarts')
        result['restarted'] = True
    else:
        restarts = s.prop('NRestarts')
    if p['health_url']:
        waited, ids = s.wait_ready(started_at, restarts)
        result['healthy_after'] = round(waited, 1) if need_start else 0.0
        result['models'] = ids
        if p['smoke']:
            result['smoke'] = s.smoke()
    module.exit_json(**result)


if __name__ == '__main__':
    main()
