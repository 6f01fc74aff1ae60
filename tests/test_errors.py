"""draftsmith/errors.py: the base class and its builtin parents, the messages' exact shapes, and the bounded
quoting (tests/hardening/test_bounded_messages.py holds the bounds in time and length on huge values)."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from draftsmith.errors import (QUOTE_LIMIT, SHOWN, ArgumentError, CheckpointError, CheckpointNotFound,
                               DraftsmithError, NotFound, OptionError, Problem, SpecError, short, short_list,
                               short_text)


@pytest.mark.parametrize("error, parents", [
    (CheckpointError("f", "m"), (ValueError,)), (NotFound("m"), (FileNotFoundError,)),
    (CheckpointNotFound("m"), (NotFound, FileNotFoundError)), (ArgumentError("f()", []), (ValueError,)),
    (OptionError("m"), (ValueError,)), (SpecError("s.yaml", []), (ValueError,)),
])
def test_every_error_is_a_draftsmith_error_and_the_builtin_callers_caught_before(error, parents):
    assert isinstance(error, DraftsmithError) and all(isinstance(error, p) for p in parents)


# ---- short / short_text / short_list -----------------------------------------------------------------------------
@pytest.mark.parametrize("value, text", [
    (1, "1"), ("ab", "'ab'"), ([1, 2], "[1, 2]"), (None, "None"),
    ((1, 2), "[1, 2]"),                                   # YAML and JSON have lists only
    (b"ab", "b'ab'"),
    (torch.zeros(2, 3), "<tensor of shape [2, 3], float32>"),
    (torch.zeros(4, dtype=torch.int8), "<tensor of shape [4], int8>"),
    (np.zeros(2, np.int64), "<numpy array of shape [2], int64>"),
])
def test_short_values_are_quoted_as_they_are(value, text):
    assert short(value) == text


def test_an_integer_is_written_out_up_to_256_bits_and_counted_past():
    assert short(2**256 - 1) == str(2**256 - 1)                       # 78 digits: fits in a quote
    assert short(2**256) == f"<an integer of about {len(str(2**256))} digits>"
    assert short(-(2**300)) == f"<an integer of about {len(str(2**300))} digits>"
    assert short(10**3000) == "<an integer of about 3001 digits>"    # past str()'s 4300-digit refusal too


def test_long_bytes_keep_their_first_80_and_say_they_were_cut():
    assert short(b"y" * QUOTE_LIMIT, 1000) == repr(b"y" * QUOTE_LIMIT)
    assert short(b"y" * (QUOTE_LIMIT + 1), 1000) == repr(b"y" * QUOTE_LIMIT) + "..."


@given(st.text(min_size=1, max_size=200), st.integers(4, 120))
def test_short_cuts_at_the_limit_with_an_ellipsis(text, limit):
    full = short(text, 10_000)
    quoted = short(text, limit)
    if len(full) <= limit:
        assert quoted == full
    else:
        assert len(quoted) == limit and quoted == full[:limit - 3] + "..."


def test_a_value_exactly_at_the_limit_is_not_cut():
    assert short("ab", 4) == "'ab'" and short("abc", 4) == "'..."
    assert short_text("abcd", 4) == "abcd"


@pytest.mark.parametrize("n", range(12))
def test_a_tuple_is_quoted_as_the_list_of_its_items_also_when_cut(n):
    assert short(tuple(range(n))) == short(list(range(n)))


def test_a_value_whose_repr_fails_is_still_quoted():
    class Broken:
        def __repr__(self):
            raise RuntimeError("no")

    class Tensor:  # taken for a torch tensor by its type name, and has no shape
        pass

    assert short(Broken()).startswith("<Broken instance at")
    assert short(Tensor()) == "<Tensor>"


class _Counted:
    """An orderable item that counts the comparisons made between such items."""
    compared = 0

    def __init__(self, n):
        self.n = n

    def __lt__(self, other):
        _Counted.compared += 1
        return self.n < other.n

    def __repr__(self):
        return f"k{self.n}"


@pytest.mark.parametrize("kind", [set, frozenset, dict.fromkeys])
def test_a_large_set_or_dict_is_quoted_without_sorting_it_whole(kind):
    """reprlib sorts a whole set or dict to quote six items (a prompt given as a set of 10^7 ids took ~20 s to be
    refused); past 10,000 items draftsmith's quote takes its first few, and a small one is still sorted."""
    _Counted.compared = 0
    text = short(kind(_Counted(i) for i in range(20_000)))
    assert _Counted.compared < 100 and text.count("k") == 6 and text.endswith("...})" if kind is frozenset
                                                                             else "...}")
    assert short(kind(_Counted(i) for i in (3, 1, 2))).replace("frozenset(", "").startswith("{k1")


def test_a_subclass_of_a_container_is_quoted_as_its_base_not_by_its_whole_repr():
    """reprlib has no repr_ for OrderedDict, Counter or a list subclass and quoted them with their whole repr
    (10^6 items: ~1 s); they are quoted as their base is, named."""
    import collections

    class Ids(list):
        def __repr__(self):
            raise AssertionError("the whole repr was built")

    assert short(Ids(range(10**6))) == "Ids([0, 1, 2, 3, 4, 5, ...])"
    _Counted.compared = 0
    assert short(collections.Counter(_Counted(i) for i in range(20_000))).startswith("Counter({k")
    assert _Counted.compared < 100
    assert short(collections.OrderedDict(b=1, a=2)) == "OrderedDict({'b': 1, 'a': 2})"   # its own order
    assert short(collections.OrderedDict((i, i) for i in range(7))) == \
        "OrderedDict({0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, ...})"


@given(st.text(max_size=300), st.integers(5, 100))
def test_short_text_keeps_both_ends_within_the_limit(text, limit):
    cut = short_text(text, limit)
    shown = "".join(repr(c)[1:-1] if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in text)   # on one line
    if len(shown) <= limit:
        assert cut == shown
    else:
        half = (limit - 3) // 2
        assert cut == shown[:half] + "..." + shown[len(shown) - half:] and len(cut) <= limit


def test_short_text_says_control_characters_as_python_writes_them():
    """A folder named with a newline ended the message's line (the rest read as another line), an escape sequence
    reached the terminal."""
    assert short_text("no\nsuch\tdir\x1b[31m\x7f") == "no\\nsuch\\tdir\\x1b[31m\\x7f"
    assert short_text("caf\u00e9 \u2028") == "caf\u00e9 \u2028"   # printable text and other separators kept
    assert short_text("a\x85b\x9b31m") == "a\\x85b\\x9b31m"   # C1 controls too: NEL, the 8-bit CSI (round 28)


def test_short_text_of_a_long_path_keeps_its_file_name():
    path = "/" + "d" * 500 + "/model.safetensors"
    cut = short_text(path, 300)
    assert len(cut) <= 300 and cut.endswith("/model.safetensors") and "..." in cut
    assert short_text(path, len(path)) == path


def test_short_list_shows_at_most_most_values_and_counts_the_rest():
    assert short_list([]) == ""
    assert short_list(["a", "b"]) == "'a', 'b'"
    assert short_list(range(5)) == "0, 1, 2, 3, 4"
    assert short_list(range(7)) == "0, 1, 2, 3, 4 and 2 more"
    assert short_list(["a", "b", "c"], most=2) == "'a', 'b' and 1 more"
    assert short_list(["a", "b"], quote=False) == "a, b"
    assert short_list(["x" * 50], limit=10, quote=False) == "xxx...xxx"
    assert short_list(["x" * 50], limit=10) == "'xxxxxx..."


# ---- the error classes' messages ----------------------------------------------------------------------------------
def test_a_checkpoint_error_names_its_file_first():
    e = CheckpointError("/ckpt/config.json", "num_attention_heads is 0")
    assert str(e) == "/ckpt/config.json: num_attention_heads is 0" and e.path.name == "config.json"
    e = CheckpointError("/ckpt/model.safetensors", "truncated", which="draft")
    assert str(e) == "draft checkpoint file /ckpt/model.safetensors: truncated" and e.which == "draft"


def test_not_found_prints_its_message_not_an_errno_tuple():
    assert str(CheckpointNotFound("checkpoint folder /x does not exist")) == "checkpoint folder /x does not exist"


@pytest.mark.parametrize("problems, head", [([], "generate(): 0 problems"), (["a"], "generate(): 1 problem"),
                                            (["a", "b"], "generate(): 2 problems")])
def test_an_argument_error_counts_and_lists_every_problem(problems, head):
    e = ArgumentError("generate()", problems)
    assert str(e) == "\n  ".join([head, *problems]) and e.problems == problems


def test_a_problem_renders_path_message_found_allowed_and_hint():
    p = Problem("draft.attention.kind", "unknown attention", found="lama", allowed="gqa (builtin), mla (builtin)",
                hint="Did you mean 'gqa'?")
    assert p.render() == ("  draft.attention.kind: unknown attention (found 'lama'). Did you mean 'gqa'?\n"
                          "      allowed: gqa (builtin), mla (builtin)")
    assert Problem("", "not a mapping").render() == "  <top>: not a mapping"
    # a found value the message already quotes is not repeated; a found None is still shown
    assert Problem("steps", "'x' is not allowed", found="x").render() == "  steps: 'x' is not allowed"
    assert Problem("steps", "required", found=None).render() == "  steps: required (found null)"   # YAML's word
    assert Problem("steps", "required", found=None).render(short) == "  steps: required (found None)"   # the API's
    assert Problem("a.b", "bad.", hint="  try c.  ").render() == "  a.b: bad. try c."
    with pytest.raises(AttributeError):   # frozen: a problem collected is never edited on its way to the message
        p.message = "other"


@pytest.mark.parametrize("n", [1, 2, SHOWN, SHOWN + 1])
def test_a_spec_error_counts_its_problems_and_prints_at_most_shown(n):
    problems = [Problem(f"draft.x{i}", "bad") for i in range(n)]
    e = SpecError("my-draft.yaml", problems)
    lines = str(e).split("\n")
    assert lines[0] == f"my-draft.yaml has {n} problem{'' if n == 1 else 's'}"
    assert lines[1:1 + min(n, SHOWN)] == [p.render() for p in problems[:SHOWN]]
    assert lines[1 + min(n, SHOWN):] == ([f"  ... and {n - SHOWN} more"] if n > SHOWN else [])
    assert e.problems == problems and e.source == "my-draft.yaml"


def test_a_regex_is_quoted_as_yaml_single_quotes_write_it():
    """A backslash is shown once, as the spec's single-quoted text holds it (repr doubled it: '^midlayer\\\\.' read as
    two backslashes to someone who wrote one); a string with a control character keeps repr's escapes."""
    from draftsmith.errors import short

    assert short("^midlayer\\.(") == "'^midlayer\\.('"
    assert short({"match": "^a\\.", "replace": "b"}) == "{'match': '^a\\.', 'replace': 'b'}"
    assert short("it's \\d") == "'it''s \\d'"
    assert short("a\\b\nc") == repr("a\\b\nc") and short("plain") == "'plain'"
    cut = short("x" * 50 + "\\" + "y" * 60)
    assert cut == "'" + "x" * 37 + "..." + "y" * 37 + "'" and len(cut) <= 80
