# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Record when each task of a playbook run starts (epoch seconds) into a JSON file.

benchmarks/serve_overhead.py enables it to time "the serve role's start to healthy": from the
first task of the play to the task that follows the role's wait for /health (+ smoke), without
the ansible-playbook process's own start-up (interpreter, inventory, plugin loading).
"""
from __future__ import annotations

DOCUMENTATION = r'''
name: llmfleet_timeline
type: aggregate
short_description: Write each task's start time to a JSON file
description:
  - Records each task's name and start time (epoch seconds), and the playbook's end, in the
    JSON file named by the environment variable C(LLMFLEET_TIMELINE_FILE).
author:
  - llmfleet maintainers (@llmfleet)
requirements:
  - enable in callbacks_enabled
'''

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'llmfleet_timeline'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.path = os.environ.get('LLMFLEET_TIMELINE_FILE', '')
        self.tasks = []

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.tasks.append({'task': task.get_name(), 'start': time.time()})

    def v2_playbook_on_stats(self, stats):
        if self.path:
            with open(self.path, 'w', encoding='utf-8') as fh:
                json.dump({'tasks': self.tasks, 'end': time.time()}, fh)
