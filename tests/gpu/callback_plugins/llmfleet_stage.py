# Copyright: llmfleet maintainers
# Apache License 2.0 (see galaxy.yml)
"""Write what a --check --diff run of the roles WOULD write into a staging tree.

Every task result that carries a diff with an ``after`` text (copy, template, llm_server's unit)
is written to ``$LLMFLEET_STAGE_DIR/<after_header path>``; llm_server results also get their
env file (rendered with the module's own ``serve_unit.render_env`` from the task's non-secret
``env``). A manifest (``manifest.json``) lists each file with the task that rendered it, plus
the facts a ``debug`` task named ``Stage: ...`` hands over (``var=...``).
"""
from __future__ import annotations

DOCUMENTATION = r'''
name: llmfleet_stage
type: aggregate
short_description: Stage the files a check-mode run would write
description:
  - Writes every diff's after-text of a C(--check --diff) run below C(LLMFLEET_STAGE_DIR).
author:
  - llmfleet maintainers (@llmfleet)
requirements:
  - enable in callbacks_enabled
'''

import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'llmfleet_stage'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.root = os.environ.get('LLMFLEET_STAGE_DIR', '')
        # several inventory hosts (emulated nodes of one machine): each host's files under <root>/<host>/
        self.per_host = os.environ.get('LLMFLEET_STAGE_PER_HOST', '') == '1'
        self.manifest = {'files': [], 'facts': {}, 'hosts': {}}

    def _write(self, path, text, task, host=''):
        root = os.path.join(self.root, host) if self.per_host and host else self.root
        dest = os.path.join(root, path.lstrip('/'))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, 'w') as f:
            f.write(text)
        self.manifest['files'].append({'path': path, 'task': task, 'bytes': len(text), 'host': host})

    def v2_runner_on_ok(self, result):
        if not self.root:
            return
        res = result._result
        task = result._task.get_name()
        host = result._host.get_name()
        if task.startswith('Stage: ') and 'ansible_facts' not in res:
            for key, value in res.items():
                if not key.startswith('_') and key not in ('changed', 'failed'):
                    self.manifest['facts'][key] = value
                    self.manifest['hosts'].setdefault(host, {})[key] = value
        diffs = res.get('diff') or []
        if isinstance(diffs, dict):
            diffs = [diffs]
        args = (res.get('invocation') or {}).get('module_args') or {}
        if res.get('unit') and args.get('state') not in ('started', 'restarted'):
            diffs = []  # llm_server stopping a unit: its diff shows no unit to run
        for diff in diffs:
            after = diff.get('after')
            # copy/template: their dest (after_header names the source of a copy with src= or of a
            # template); llm_server names the destination after_header
            header = str(res.get('dest') or args.get('dest') or '')
            if not header.startswith('/'):
                header = diff.get('after_header') or ''
            if '/.ansible/tmp/' in header or 'ansible-local-' in header or not header.startswith('/'):
                header = diff.get('before_header') or ''
            if isinstance(after, str) and after and header.startswith('/'):
                self._write(header, after, task, host)
        if res.get('unit') and 'env_dir' in args and args.get('state') in ('started', 'restarted'):
            from ansible_collections.llmfleet.cluster.plugins.module_utils import serve_unit
            env_path = os.path.join(args['env_dir'], args['name'] + '.env')
            self._write(env_path, serve_unit.render_env(dict(args.get('env') or {})), task, host)

    def v2_playbook_on_stats(self, stats):
        if not self.root:
            return
        os.makedirs(self.root, exist_ok=True)
        with open(os.path.join(self.root, 'manifest.json'), 'w') as f:
            json.dump(self.manifest, f, indent=1, sort_keys=True, default=str)
