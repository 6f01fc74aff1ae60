"""Mutation survivors of draftsmith/chat.py (2026-11-28): the folder a missing template is said of, the
tokenizer_config.json reading of has_chat_template, and the bounds its messages quote values and errors within.
Killed 18/26 -> 25/26; the survivor, short_text(folder, 299), is equivalent: a path cut to 299 or 300 characters
keeps (limit - 3) // 2 = 148 on each side either way."""
import json

import pytest

from draftsmith.chat import TemplateRefused, content_text, has_chat_template, render, template_problem


class NoTemplate:
    chat_template = None


def test_a_missing_template_names_the_folder_only_when_given():
    assert " in /some/target has no chat template" in template_problem(NoTemplate(), "/some/target")
    assert "tokenizer has no chat template" in template_problem(NoTemplate())
    long = "/x" * 400
    said = template_problem(NoTemplate(), long)
    assert f" in {long[:148]}...{long[-148:]} has" in said   # a path is cut to 300 characters, not 299 or 301


@pytest.mark.parametrize("config, found", [
    ({"chat_template": "{{ messages }}"}, True),      # older transformers keep it here (SmolLM2's folder does)
    ({"chat_template": ""}, False), ({}, False),
    (["chat_template"], False),                       # JSON that is no object holds no template
])
def test_a_template_in_tokenizer_config_counts(tmp_path, config, found):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert has_chat_template(tmp_path) is found


def test_no_tokenizer_config_and_no_jinja_file_is_no_template(tmp_path):
    assert has_chat_template(tmp_path) is False
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    assert has_chat_template(tmp_path) is False
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    assert has_chat_template(tmp_path) is True


@pytest.mark.parametrize("n, cut", [(51, False), (52, True)])
def test_a_bad_content_is_quoted_within_60_characters(n, cut):
    value = {"k": "x" * n}   # repr: {'k': 'xxx...'}: n + 9 characters; 60 fit, 61 are cut to 57 + '...'
    with pytest.raises(ValueError) as e:
        content_text(value, "c")
    quoted = str(e.value).removeprefix("c is ").partition(": expected")[0]
    assert quoted == (repr(value)[:57] + "..." if cut else repr(value))


@pytest.mark.parametrize("n, cut", [(200, False), (201, True)])
def test_a_template_error_is_said_within_200_characters(n, cut):
    class Raises:
        def apply_chat_template(self, *a, **k):
            raise RuntimeError("e" * n)

    with pytest.raises(TemplateRefused) as e:
        render(Raises(), [{"role": "user", "content": "x"}], answer=True)
    said = str(e.value).removeprefix("the chat template refused it: RuntimeError: ")
    assert len(said) == (199 if cut else n) and ("..." in said) == cut


def test_a_messages_other_keys_reach_the_template():
    from draftsmith.chat import texts

    call = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}
    assert texts([call, {"role": "tool", "content": "1", "tool_call_id": "c1"}]) == [
        {**call, "content": ""}, {"role": "tool", "content": "1", "tool_call_id": "c1"}]
