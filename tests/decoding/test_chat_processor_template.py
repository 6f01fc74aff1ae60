"""A target whose chat template is only in chat_template.json (the processor's file, as Mistral-Small-3.1 ships it;
AutoProcessor reads it, AutoTokenizer does not) renders conversations with it, as the same template placed in
tokenizer_config.json renders them; before, `generate --chat` said the target "has no chat template ... drop --chat",
exit 2, with the template right there (h118). A processor's template that loops over content parts and never asks
whether a content is a string (llava-hf's) gets a text content as one text part: given the string, it wrote nothing
of it. A malformed chat_template.json is an error naming the file."""
import json

import pytest
from typer.testing import CliRunner

from draftsmith.assembler.assemble import read_tokenizer
from draftsmith.chat import has_chat_template, processor_template, render, wants_parts
from draftsmith.cli import app
from draftsmith.errors import CheckpointError
from draftsmith.testing import write_byte_tokenizer, write_eagle3, write_target

TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{% if m['content'] is string %}{{ m['content'] }}{% else %}"
            "{% for c in m['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
            "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
# llava-hf's form: images first, then the text parts, each picked from the content's parts; no string branch
LLAVA = ("{% for m in messages %}{{ m['role'].upper() + ': ' }}"
         "{% for c in m['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}{% endfor %}"
         "{% for c in m['content'] | selectattr('type', 'equalto', 'text') %}{{ c['text'] + ' ' }}{% endfor %}"
         "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}")
TALK = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}, {"role": "user", "content": "why?"}]


def processor_only(folder, template):
    """A byte tokenizer without a template, the template in chat_template.json as processors save it."""
    write_byte_tokenizer(folder)
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": template}, indent=2))
    return folder


def test_a_template_only_in_chat_template_json_renders_as_in_tokenizer_config(tmp_path):
    write_byte_tokenizer(tmp_path / "config", chat_template=TEMPLATE)
    processor_only(tmp_path / "proc", TEMPLATE)
    assert has_chat_template(tmp_path / "proc") is True   # before: False (generate --chat and train --chat: exit 2)
    said, read = read_tokenizer(tmp_path / "config"), read_tokenizer(tmp_path / "proc")
    assert read.chat_template == said.chat_template == TEMPLATE
    for answer in (True, False):
        assert render(read, TALK, answer=answer) == render(said, TALK, answer=answer)
    assert render(read, TALK, answer=True) == "<|system|>be brief<|user|>hi<|assistant|>hello<|user|>why?<|assistant|>"


def test_the_tokenizers_own_template_wins_over_the_processors(tmp_path):
    """AutoTokenizer's template stays the one rendered (chat_template.json is read only where it has none), and a
    processor file it never reads is not checked."""
    write_byte_tokenizer(tmp_path, chat_template=TEMPLATE)
    (tmp_path / "chat_template.json").write_text("{not json")
    assert has_chat_template(tmp_path) is True
    assert read_tokenizer(tmp_path).chat_template == TEMPLATE


def test_a_processor_template_that_only_loops_over_parts_gets_text_as_a_part(tmp_path):
    tok = read_tokenizer(processor_only(tmp_path, LLAVA))
    assert wants_parts(LLAVA) is True and wants_parts(TEMPLATE) is False
    as_parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    want = tok.apply_chat_template(as_parts, tokenize=False, add_generation_prompt=True)
    assert want == "USER: hi ASSISTANT:"
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                   add_generation_prompt=True) == "USER: ASSISTANT:"   # the string: nothing written
    assert render(tok, [{"role": "user", "content": "hi"}], answer=True) == want      # before: "USER: ASSISTANT:"
    assert render(tok, as_parts, answer=True) == want
    mixed = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what?"}]}]
    assert render(tok, mixed, answer=True) == "USER: <image>\nwhat? ASSISTANT:"   # parts go on as they are


def test_a_template_that_asks_for_strings_gets_them_as_they_are(tmp_path):
    """Gemma-4's system turn writes `messages[0]['content'] | trim` with no list branch, while its turns loop over
    parts and ask `is string`: a text content stays a string (one part would be written as its repr)."""
    gemma = ("{{ messages[0]['content'] | trim }}|{% for m in messages[1:] %}{% if m['content'] is string %}"
             "{{ m['content'] }}{% else %}{% for c in m['content'] %}{{ c['text'] }}{% endfor %}{% endif %}"
             "{% endfor %}")
    assert wants_parts(gemma) is False
    tok = read_tokenizer(processor_only(tmp_path, gemma))
    assert render(tok, TALK[:2], answer=False) == "be brief|hi"


@pytest.mark.parametrize("text, says", [
    ("{not json", "cannot be read as JSON"),
    ('["{{ messages }}"]', "holds ['{{ messages }}'], no chat_template"),
    ('{"template": "x"}', "holds keys ['template'], no chat_template"),
    ('{"chat_template": 3}', "chat_template is 3 (int), not the template's Jinja text"),
])
def test_a_malformed_chat_template_json_is_an_error_naming_it(tmp_path, text, says):
    write_byte_tokenizer(tmp_path)
    (tmp_path / "chat_template.json").write_text(text)
    for read in (processor_template, has_chat_template, read_tokenizer):
        with pytest.raises(CheckpointError, match="chat_template.json") as e:
            read(tmp_path)
        assert says in str(e.value) and '{"chat_template": "<Jinja text>"}' in str(e.value), str(e.value)


def test_an_empty_or_absent_chat_template_json_is_no_template(tmp_path):
    write_byte_tokenizer(tmp_path)
    assert processor_template(tmp_path) is None and has_chat_template(tmp_path) is False
    (tmp_path / "chat_template.json").write_text('{"chat_template": ""}')
    assert processor_template(tmp_path) is None and has_chat_template(tmp_path) is False
    assert read_tokenizer(tmp_path).chat_template is None


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("proc")
    target = write_target(root / "t", tokenizer=True, num_hidden_layers=8)
    processor_only(target, TEMPLATE)
    return target, write_eagle3(root / "d", target)


def generate(target, draft):
    return CliRunner().invoke(app, [str(a) for a in ("generate", "--spec", "eagle3-llama", "--target", target,
                                                     "--draft", draft, "--chat", "--prompt", "hi",
                                                     "--max-new-tokens", "2", "--no-compare")],
                              env={"COLUMNS": "1000"})


def test_generate_chat_renders_with_the_processors_template(pair):
    import draftsmith

    target, draft = pair
    res = generate(target, draft)
    assert res.exit_code == 0, res.output   # before: exit 2, "has no chat template ... drop --chat"
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft, dtype="float64")
    ids = model.tokenizer.encode("<|user|>hi<|assistant|>", add_special_tokens=False)
    got = model.generate([{"role": "user", "content": "hi"}], max_new_tokens=3)
    assert got.token_ids == model.generate(ids, max_new_tokens=3).token_ids


def test_generate_chat_names_a_malformed_chat_template_json(pair, tmp_path):
    import shutil

    target, draft = pair
    broken = shutil.copytree(target, tmp_path / "t")
    (broken / "chat_template.json").write_text('{"chat_template": ["x"]}')
    res = generate(broken, draft)
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert f"--chat: {broken / 'chat_template.json'}: chat_template is ['x'] (list)" in said, said
