"""Mutation round 13 on draftsmith/registry/spec_path.py and draftsmith/registry/results.py: what earlier tests left
open. spec_path: folder_specs gives the folder's specs (not its skipped files); a top-level mapping that ends without
a name: says exactly "no top-level name:" and never reads a later YAML document of the file; the bounds on what a
reason quotes (a tag and a value at 60 characters, a DRAFTSMITH_SPEC_PATH entry at 300, a read error's text at 200)
are where they are stated; a read error without an errno text is said by its message. results: the kind's problem
stands whatever a probe says; the probe tries a guarded result only, on its context; only a plugin's result whose
kind has methods called later is wrapped (draftsmith's own objects, by module, never); a wrapped result copies, and
a wrong answer or an exception of its method is named exactly, its message cut at 300 characters."""
import copy
import errno
import os
import re
from pathlib import Path

import pytest

from draftsmith.errors import NotFound
from draftsmith.hooks import SpecSource
from draftsmith.hooks.kinds import Kind
from draftsmith.registry.results import ComponentFailed, Guarded, checked
from draftsmith.registry.spec_path import SPEC_PATH, folder_specs, read_name, spec_folders


def write(folder, text, file="s.yaml"):
    path = folder / file
    path.write_text(text)
    return path


def test_folder_specs_gives_the_specs_not_the_skipped_files(tmp_path):
    # catches spec_path.py:57 scan_folder(folder)[0] -> [1] (the skipped files returned as specs)
    good = write(tmp_path, "name: fine\n", "a.yaml")
    write(tmp_path, "name: 123\n", "b.yml")
    assert folder_specs(tmp_path) == [SpecSource(name="fine", path=good)]


@pytest.mark.parametrize("text", ["other: 1\n", "other: 1\n---\nname: later\n", "a: {b: 1}\n---\nname: later\n"])
def test_a_top_mapping_without_a_name_ends_the_read(tmp_path, text):
    # catches spec_path.py:107 depth <= 0 -> < 0 (read on into the next document: its name, or "the file is empty")
    assert read_name(write(tmp_path, text)) == (None, "no top-level name:")


def test_a_second_document_of_a_named_file_is_not_read(tmp_path):
    assert read_name(write(tmp_path, "name: first\n---\nname: second\n")) == ("first", None)


@pytest.mark.parametrize("n", [60, 61])
def test_a_tag_is_quoted_whole_up_to_60_characters(tmp_path, n):
    # catches spec_path.py:157 short_text(tag, 60) -> 59 / 61
    tag = "!" + "t" * (n - 1)
    shown = tag if n <= 60 else tag[:28] + "..." + tag[-28:]
    assert read_name(write(tmp_path, f"name: {tag} fam\n")) == (
        None, f"name: fam is not a string (YAML reads it as tagged {shown}; quote it)")


@pytest.mark.parametrize("n", [60, 61])
def test_a_value_is_quoted_whole_up_to_60_characters(tmp_path, n):
    # catches spec_path.py:158 short_text(event.value, 60) -> 59 / 61
    value = "1" * n
    shown = value if n <= 60 else value[:28] + "..." + value[-28:]
    assert read_name(write(tmp_path, f"name: {value}\n")) == (
        None, f"name: {shown} is not a string (YAML reads it as a number; quote it)")


@pytest.mark.parametrize("n", [300, 301])
def test_an_entry_that_is_not_there_is_quoted_whole_up_to_300_characters(tmp_path, n):
    # catches spec_path.py:44 short_text(entry, 300) -> 299 / 301
    head = str(tmp_path / "nowhere") + "/"
    entry = head + "d/" * ((n - len(head)) // 2) + "x" * ((n - len(head)) % 2)
    assert len(entry) == n
    with pytest.raises(NotFound) as e:
        spec_folders(entry)
    shown = entry if n <= 300 else entry[:148] + "..." + entry[-148:]
    assert str(e.value).startswith(f"{SPEC_PATH} names {shown}, which does not exist (")


@pytest.mark.parametrize("n", [200, 201])
def test_a_read_error_is_quoted_whole_up_to_200_characters(tmp_path, monkeypatch, n):
    # catches spec_path.py:100 short_text(e.strerror or str(e), 200) -> 199 / 201, and `or` -> `and`
    path = write(tmp_path, "name: fam\n")
    text = "e" * n

    def refuse(self):
        raise OSError(errno.EIO, text)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    shown = text if n <= 200 else text[:98] + "..." + text[-98:]
    assert read_name(path) == (None, f"could not be read: {shown}")


def test_a_read_error_without_an_errno_text_is_said_by_its_message(tmp_path, monkeypatch):
    # catches spec_path.py:100 e.strerror or str(e) -> and ("could not be read: None")
    path = write(tmp_path, "name: fam\n")

    def refuse(self):
        raise OSError("the disk went away")

    monkeypatch.setattr(Path, "read_bytes", refuse)
    assert read_name(path) == (None, "could not be read: the disk went away")


def test_the_pathsep_entry_names_the_folder_once_by_its_first_spelling(tmp_path):
    (tmp_path / "a").mkdir()
    os.symlink(tmp_path / "a", tmp_path / "link")
    assert spec_folders(os.pathsep.join([str(tmp_path / "link"), str(tmp_path / "a")])) == [tmp_path / "link"]


# --- draftsmith/registry/results.py: checked() and Guarded ------------------------------------------------------

class Rule:
    """A plugin's result (its module is not draftsmith's): apply answers ``self.answer``, or raises it."""

    def __init__(self, answer=None):
        self.answer, self.note = answer, "kept"

    def apply(self, *args, **kwargs):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    def __repr__(self):
        return "Rule()"


def kind(probe=None, types=(str, type(None))):
    return Kind("factory(params)", "a rule", module=False, methods={"apply": types}, probe=probe)


def test_a_result_of_the_wrong_sort_is_refused_guarded_or_not_even_when_a_probe_would_pass_it():
    # catches results.py:25 `and` -> `or` (the probe's None would override the kind's problem) and :27 is not -> is
    for guard in (False, True):
        with pytest.raises(ComponentFailed, match=r"^w: its factory returned 3 \(it has no apply\) in f\(\)$"):
            checked(3, kind(probe=lambda made, ctx: None), "w", " in f()", guard=guard, context={})


def test_the_probe_tries_a_guarded_result_on_its_context_only():
    # catches results.py:25 why is None / probe is not None / context is not None, each negated
    seen = []

    def probe(made, ctx):
        seen.append(ctx)
        return "too small"

    with pytest.raises(ComponentFailed, match=r"^w: its factory returned Rule\(\) \(too small\)$"):
        checked(Rule(), kind(probe), "w", "", guard=True, context={"dim": 4})
    assert seen == [{"dim": 4}]
    assert isinstance(checked(Rule(), kind(probe), "w", "", guard=False, context={"dim": 4}), Rule)
    assert isinstance(checked(Rule(), kind(probe), "w", "", guard=True, context=None), Guarded)
    assert seen == [{"dim": 4}]
    assert isinstance(checked(Rule(), kind(), "w", "", guard=True, context={"dim": 4}), Guarded)


def test_an_empty_reason_adds_no_parentheses_and_a_repr_over_lines_is_shown_by_its_class():
    # catches results.py:28 "\n" not in repr(made) -> in
    with pytest.raises(ComponentFailed, match=r"^w: its factory returned None!$"):
        checked(None, kind(), "w", "!", guard=True)

    class Tall(Rule):
        def __repr__(self):
            return "Tall(\n  x\n)"

    with pytest.raises(ComponentFailed, match=r"^w: its factory returned a Tall \(no\)$"):
        checked(Tall(), kind(lambda made, ctx: "no"), "w", "", guard=True, context={})


def test_only_a_guarded_plugin_result_is_wrapped_not_draftsmiths_own():
    # catches results.py:31 == -> != and partition(...)[0] -> [1], :32 `and` -> `or` and `not ours` -> ours
    made = Rule()
    assert checked(made, kind(), "w", "", guard=False) is made
    assert checked(made, Kind("f()", "x", module=False), "w", "", guard=True) is made    # nothing called later
    wrapped = checked(made, kind(), "w", "", guard=True)
    assert type(wrapped) is Guarded and wrapped.note == "kept" and repr(wrapped) == "Rule()"
    ours = SpecSource(name="n", path=Path("p"))          # draftsmith.hooks: draftsmith's own code
    assert checked(ours, Kind("f()", "x", module=False, fields=("name",), methods={"__eq__": ()}), "w", "",
                   guard=True) is ours
    Lookalike = type("Lookalike", (Rule,), {"__module__": "draftsmith_plugin.rules"})   # not draftsmith's
    assert type(checked(Lookalike(), kind(), "w", "", guard=True)) is Guarded


def test_a_guarded_result_copies_and_answers_what_it_may():
    # catches results.py:46 in -> not in, :49 in -> not in, :59 `and` -> `or` (no types listed: any answer)
    wrapped = Guarded(Rule(5), "w", {"apply": ()})
    assert copy.copy(wrapped).apply() == 5 and copy.deepcopy(wrapped).note == "kept"
    assert Guarded(Rule(5), "w", {}).apply() == 5
    assert Guarded(Rule("x"), "w", {"apply": (str,)}).apply("fc.weight") == "x"


def test_a_wrong_answer_names_the_call_and_the_sorts_it_may_be():
    # catches results.py:59 drop `not`, :60 t is type(None) -> is not
    wrapped = checked(Rule(5), kind(), "weight_rule 'x' (plugin 'p')", "", guard=True)
    with pytest.raises(ComponentFailed, match=r"^weight_rule 'x' \(plugin 'p'\): its apply\('fc', n=1\) returned 5; "
                                              r"apply must return str or None$"):
        wrapped.apply("fc", n=1)


@pytest.mark.parametrize("n", [300, 301])
def test_a_raising_method_is_named_with_its_message_up_to_300_characters(n):
    # catches results.py:58 short_text(str(e), 300) -> 299 / 301
    text = "m" * n
    wrapped = Guarded(Rule(ValueError(text)), "w", {"apply": ()})
    shown = text if n <= 300 else text[:148] + "..." + text[-148:]
    with pytest.raises(ComponentFailed) as e:
        wrapped.apply()
    assert re.fullmatch(rf"w: its apply\(\) raised ValueError: {shown} \(in test_spec_path_kills_round13\.Rule\.apply, "
                        r"line \d+\)", str(e.value)) and isinstance(e.value.__cause__, ValueError)
    with pytest.raises(NotFound, match="^own$"):          # a draftsmith error passes as it is
        Guarded(Rule(NotFound("own")), "w", {"apply": ()}).apply()


# Equivalent mutants (left alive on purpose):
# - spec_path.py:101 `after_name = False` -> True: after_name is read only when `not is_key`, and the first event at
#   depth 1 always has is_key True, which reassigns after_name before any read; the initial value is never seen.
