"""chat_output: answer and reasoning of a chat message / stream delta, in the shapes servers send."""
import pytest

from ansible_collections.llmfleet.cluster.plugins.module_utils import chat_output as co


@pytest.mark.parametrize("message, reasoning, content", [
    ({"role": "assistant", "content": "hi"}, "", "hi"),                                 # no parser
    ({"content": None, "reasoning": "hm"}, "hm", ""),                                   # vLLM >= 0.13, cut off in thought
    ({"content": "hi", "reasoning": "hm"}, "hm", "hi"),                                 # after </think>
    ({"content": None, "reasoning_content": "hm"}, "hm", ""),                           # SGLang / older vLLM
    ({"content": "", "reasoning": None, "reasoning_content": "hm"}, "hm", ""),          # both keys, one filled
    ({"role": "assistant", "content": ""}, "", ""),                                     # a stream's first delta
    ({}, "", ""),
    (None, "", ""),
    ({"content": ["not", "text"], "reasoning": 3}, "", ""),                             # foreign shapes count as nothing
])
def test_parts(message, reasoning, content):
    assert co.parts(message) == (reasoning, content)
    assert co.has_output(reasoning, content) is bool(reasoning or content)


@pytest.mark.parametrize("doc, field, expected", [
    ({"choices": [{"message": {"content": "a"}}]}, "message", {"content": "a"}),
    ({"choices": [{"delta": {"reasoning": "b"}}]}, "delta", {"reasoning": "b"}),
    ({"choices": []}, "delta", {}),                     # vLLM's usage-only last chunk
    ({"choices": [None]}, "message", {}),
    ({"error": "x"}, "message", {}),
    ("not a dict", "message", {}),
])
def test_first_choice(doc, field, expected):
    assert co.first_choice(doc, field) == expected
