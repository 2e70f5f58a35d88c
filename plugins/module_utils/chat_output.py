# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What a chat completion produced: its answer and its reasoning, from a message or a stream delta. Pure.

A server started with a reasoning parser (vLLM ``--reasoning-parser``, SGLang ``--reasoning-parser``)
moves the model's thinking out of ``content``: vLLM >= 0.13 into ``reasoning`` (older releases and
SGLang: ``reasoning_content``). A reasoning model that is cut off by ``max_tokens`` before it stops
thinking returns ``content: null`` and all its tokens as reasoning, so a check that reads only
``content`` calls a working endpoint broken. Both parts count as output; callers show them apart.
"""

REASONING_KEYS = ('reasoning', 'reasoning_content')


def _text(value):
    return value if isinstance(value, str) else ''


def parts(message):
    """(reasoning, content) of a chat message or a streamed delta; '' for a missing part."""
    message = message if isinstance(message, dict) else {}
    reasoning = ''
    for key in REASONING_KEYS:
        reasoning = _text(message.get(key))
        if reasoning:
            break
    return reasoning, _text(message.get('content'))


def first_choice(doc, field):
    """`choices[0][field]` (field: 'message' or 'delta') of a response document, or {}."""
    choices = (doc or {}).get('choices') if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return {}
    value = choices[0].get(field)
    return value if isinstance(value, dict) else {}


def has_output(reasoning, content):
    """True when either part holds text (whitespace counts: a model may emit only spaces)."""
    return bool(reasoning) or bool(content)
