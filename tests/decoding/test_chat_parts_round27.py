"""A chat template that loops over a message's content parts (Gemma-3's, Mistral-Small-3.1's) gets the parts as
transformers' apply_chat_template gives them; one that writes content as a string gets their text parts joined by
newlines (vLLM's string format). Before, every template got the joined text: a parts-looping template wrote 'a\\nb'
where transformers writes 'ab' (an oracle hunt of round 27)."""
import pytest
from transformers import AutoTokenizer

import draftsmith
from draftsmith.chat import loops_over_parts
from draftsmith.testing import write_byte_tokenizer, write_eagle3, write_target

PARTS = ("{% for m in messages %}<|{{ m['role'] }}|>{% if m['content'] is string %}{{ m['content'] }}{% else %}"
         "{% for block in m['content'] %}{% if block['type'] == 'text' %}{{ block['text'] }}{% else %}[img]{% endif %}"
         "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
TALK = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}]


@pytest.fixture(scope="module")
def parts_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    write_target(root / "t", tokenizer=True, num_hidden_layers=8)
    write_byte_tokenizer(root / "t", chat_template=PARTS)
    write_eagle3(root / "d", root / "t")
    return root, draftsmith.assemble("eagle3-llama", target=root / "t", draft=root / "d", dtype="float64")


def test_a_template_that_loops_over_parts_gets_them_as_transformers_gives_them(parts_pair):
    root, model = parts_pair
    want = AutoTokenizer.from_pretrained(root / "t").apply_chat_template(TALK, add_generation_prompt=True,
                                                                          tokenize=True, return_dict=False)
    assert model.tokenizer.decode(want) == "<|user|>a[img]b<|assistant|>"   # trim_blocks eats the newline
    got = model.generate(TALK, max_new_tokens=6)
    assert got.token_ids == model.generate(list(want), max_new_tokens=6).token_ids
    assert got.token_ids == model.generate_baseline(TALK, max_new_tokens=6).token_ids


@pytest.mark.parametrize("template, loops", [
    ("{% for m in messages %}{{ m['content'] }}{% endfor %}", False),
    (PARTS, True),
    ("{% for m in messages %}{% for b in m.content | selectattr('type', 'equalto', 'text') %}{{ b.text }}"
     "{% endfor %}{% endfor %}", True),
    ("{% for m in messages %}{% generation %}{% for b in m.content %}{{ b.text }}{% endfor %}{% endgeneration %}"
     "{% endfor %}", True),   # transformers' generation tag parsed (a plain Jinja parse fails: False)
    ({"default": PARTS, "tool_use": "{{ messages }}"}, True),
    ("{% for m in messages %}{% set c = m['content'] %}{% set d = c %}{% for b in d %}{{ b.text }}{% endfor %}"
     "{% endfor %}", True),   # through the variables a set gives it to, as vLLM follows them
    ("{% for m in messages %}{% set c = m['content'] %}{% set d = m['role'] %}{% for b in d %}{{ b }}{% endfor %}"
     "{{ c }}{% endfor %}", False),
    ("{% for m in messages %", False), (None, False),
])
def test_a_template_loops_over_parts_where_its_syntax_says_so(template, loops):
    assert loops_over_parts(template) is loops


def test_train_renders_a_chat_record_as_generate_renders_the_conversation(parts_pair):
    """train --chat joined a record's parts before the template saw them ('a\nb'), while generate() passed them to
    this template ('a[img]b'): the draft learned on another text than it meets (the review of round 27)."""
    from draftsmith.chat import render
    from draftsmith.train.records import jsonl_text

    _, model = parts_pair
    said = jsonl_text({"messages": TALK}, lambda turns: render(model.tokenizer, turns, answer=False))
    assert said == render(model.tokenizer, TALK, answer=False) == "<|user|>a[img]b"
