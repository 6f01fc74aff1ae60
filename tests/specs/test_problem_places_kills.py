"""Mutation survivors of errors.py's YAML line map (yaml_places, with_places, spec_file_text, _file_order and
SpecError's line attachment): which files are read for lines (the suffix, the size bound), nesting far past the
spec bound mapped without recursing, the 1-based place of the document itself and of each key (columns as well as
lines), where a problem with a line but no column sorts, and the cut of a long source."""
from draftsmith import limits
from draftsmith.errors import Problem, SpecError, spec_file_text, with_places
from draftsmith.yaml_places import yaml_places


def test_only_yaml_files_are_read_for_lines(tmp_path):
    # catches errors.py:200 `suffix not in (...) or not is_file() or size > SPEC_BYTES` -> the same with `and`
    # (then any existing file, a checkpoint's config.json or a .txt, would be read and parsed as the spec's YAML,
    # and a problem about it would be given a line of a file that is no spec)
    for name in ("config.json", "notes.txt"):
        path = tmp_path / name
        path.write_text('{"a": 1}\n')
        assert spec_file_text(str(path)) is None
        assert SpecError(str(path), [Problem("a", "bad")]).problems[0].line is None
    path = tmp_path / "spec.yaml"
    path.write_text('{"a": 1}\n')
    assert SpecError(str(path), [Problem("a", "bad")]).problems[0].line == 1


def test_a_spec_file_of_exactly_the_size_bound_is_read(tmp_path, monkeypatch):
    # catches errors.py:200 `st_size > limits.SPEC_BYTES` -> `>=` (the bound is the largest spec file allowed, as
    # the loader reads it; one byte over is refused, the bound itself is not)
    text = "name: sized\ndraft: {kind: x}\n"
    path = tmp_path / "sized.yaml"
    path.write_text(text)
    monkeypatch.setattr(limits, "SPEC_BYTES", len(text))
    assert spec_file_text(str(path)) == text
    monkeypatch.setattr(limits, "SPEC_BYTES", len(text) - 1)
    assert spec_file_text(str(path)) is None


def test_any_nesting_is_mapped_without_recursing():
    # the event stream is walked with a stack of its own: a document far deeper than a spec may be (which the
    # loader refuses first) still maps, and siblings are counted in the order written
    deep = "[" * 20 * limits.YAML_DEPTH + "]" * 20 * limits.YAML_DEPTH
    assert yaml_places(deep).where[""] == (1, 1)
    siblings = "[" + ", ".join(["[]"] * (2 * limits.YAML_DEPTH)) + "]"
    assert yaml_places(siblings).where["63"] == (1, 2 + 4 * 63)


def test_the_document_and_each_key_have_their_1_based_line_and_column():
    # catches errors.py:226 root `line + 1` -> -1, +2, +0 and `column + 1` -> -1, +2, +0, :240 a key's `column + 1`
    # -> -1, +2, +0 (the columns order problems on one line against problems raised with a column elsewhere, and the
    # document's place is the line a problem about the whole spec is given)
    text = "# a comment\n\n  name: x\n  draft: {kind: eagle3, steps: 2}\n"
    places = yaml_places(text)
    where = places.where
    assert where[""] == (3, 3)
    assert where["name"] == (3, 3)
    assert where["draft"] == (4, 3)
    assert where["draft.kind"] == (4, 11)
    assert where["draft.steps"] == (4, 25)
    top = with_places([Problem("", "missing 'weights'"), Problem("weights.rules", "missing")], places, top=True)
    assert [(p.line, p.column) for p in top] == [(3, 3), (3, 3)]
    late = with_places([Problem("weights.rules", "missing"), Problem("draft.kind", "bad")], places)
    assert [(p.line, p.column) for p in late] == [(None, None), (4, 11)]   # a path none of whose parts is written


def test_a_problem_with_a_line_but_no_column_comes_first_on_its_line():
    # catches errors.py:188 `p.column or 0` -> `p.column or 1` (a problem raised with only a line is about the
    # line as a whole, so it leads that line's problems, whatever order they were given in; the mutant ties it with
    # a problem at column 1 and lets the given order decide)
    at_key = Problem("a.b", "at the key", line=3, column=1)
    whole = Problem("a", "the whole line", line=3)
    err = SpecError("<spec>", [at_key, whole])
    assert [p.message for p in err.problems] == ["the whole line", "at the key"]


def test_a_long_source_is_cut_to_300_characters_in_the_header():
    # catches errors.py:180 `short_text(str(source), 300)` -> 301 (the header's bound on a user's path; 299 gives
    # the same cut, (299 - 3) // 2 == (300 - 3) // 2, so that mutant is equivalent)
    source = "d/" * 300 + "spec.yaml"
    head = str(SpecError(source, [Problem("a", "bad")])).splitlines()[0]
    shown = head.removesuffix(" has 1 problem")
    assert len(shown) <= 300 and shown.endswith("spec.yaml") and "..." in shown
