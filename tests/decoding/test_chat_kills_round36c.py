"""Mutation round 36 (part 3): chat.py's content format (texts' defaults, wants_parts on no template, a template
that does not parse, a test on the content that is not ``is string``)."""
from draftsmith.chat import loops_over_parts, texts, wants_parts

PARTS = [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]
LOOPS = "{% for m in messages %}{% for c in m['content'] %}{{ c['text'] }}{% endfor %}{% endfor %}"


def test_texts_joins_parts_and_keeps_strings_by_default():
    given = texts([{"role": "user", "content": PARTS}, {"role": "assistant", "content": "ok"}])
    assert given == [{"role": "user", "content": "hi\nthere"}, {"role": "assistant", "content": "ok"}]


def test_no_template_text_wants_no_parts():
    for template in (None, {"tool_use": LOOPS}, 3):   # named templates without 'default', no text
        assert not loops_over_parts(template) and not wants_parts(template), template
    assert wants_parts({"default": LOOPS})


def test_a_template_that_does_not_parse_wants_no_parts():
    broken = LOOPS + "{% for"
    assert not loops_over_parts(broken) and not wants_parts(broken)


def test_only_a_string_test_on_the_content_keeps_a_string():
    other_test = ("{% for m in messages %}{% if m['content'] is defined %}{% for c in m['content'] %}{{ c['text'] }}"
                  "{% endfor %}{% endif %}{% endfor %}")
    string_elsewhere = "{% if bos_token is string %}{{ bos_token }}{% endif %}" + LOOPS
    asks = ("{% for m in messages %}{% if m['content'] is string %}{{ m['content'] }}{% else %}"
            "{% for c in m['content'] %}{{ c['text'] }}{% endfor %}{% endif %}{% endfor %}")
    assert wants_parts(other_test) and wants_parts(string_elsewhere)
    assert loops_over_parts(asks) and not wants_parts(asks)
