"""Where a spec's problems are: in file order (line, then column) whichever phase found them, and with the line of
their dotted path even when they are found after the spec loaded (against a target)."""
import re

import pytest

import draftsmith
from draftsmith.errors import Problem, SpecError
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target

LLAMA = (BUILTIN_DIR / "eagle3-llama.yaml").read_text()


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def edited(text: str, **changes: str) -> str:
    for old, new in changes.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def test_problems_of_both_phases_are_listed_in_file_order(tmp_path):
    text = edited(LLAMA, **{
        "name: eagle3-llama": "name: ordered",
        "attention: {kind: gqa, rope: neox}": "attention: {kind: gqaa, rope: neox}",  # phase 2
        "norms: {input: all, final: true}": "norms: {input: every, final: true}",      # phase 1
        "kind: eagle3": "kind: eagle33",                                                # phase 2
        "feed_back: pre_norm": "feed_back: pre",                                        # phase 1
        "quant: {method: none}": "quant: {method: nope}",                               # phase 2
        # phase 1, on one line in the other order than the schema's fields (topk, then steps)
        "decoding: {topk: 4, steps: 5,": "decoding: {steps: -5, topk: 0,",
    })
    path = tmp_path / "ordered.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path)
    places = [(p.line, p.column) for p in info.value.problems]
    assert len(places) == 7 and None not in {line for line, _ in places}
    assert places == sorted(places), str(info.value)
    paths = [p.path for p in info.value.problems]
    assert paths == ["draft.attention.kind", "draft.norms.input", "draft.fusion.kind", "draft.feed_back",
                     "quant.method", "decoding.steps", "decoding.topk"]
    # the rendered message is in the same order
    rendered = [int(n) for n in re.findall(r"\(line (\d+)\)$", str(info.value), re.MULTILINE)]
    assert rendered == [line for line, _ in places]


def test_problems_without_a_line_come_after_those_with_one_in_their_given_order():
    problems = [Problem("c", "no line 1"), Problem("b", "line 9", line=9), Problem("a", "no line 2"),
                Problem("d", "line 3, column 8", line=3, column=8), Problem("e", "line 3, column 2", line=3, column=2)]
    err = SpecError("<spec>", problems)
    assert [p.message for p in err.problems] == ["line 3, column 2", "line 3, column 8", "line 9", "no line 1",
                                                 "no line 2"]
    assert [line.split(": ", 1)[1] for line in str(err).splitlines()[1:]] == [
        "line 3, column 2 (line 3)", "line 3, column 8 (line 3)", "line 9 (line 9)", "no line 1", "no line 2"]


def test_a_problem_raised_against_a_spec_file_gets_the_line_of_its_path(tmp_path):
    path = tmp_path / "later.yaml"
    path.write_text("name: later\ndraft:\n  fusion:\n    kind: eagle3\n\n    aux_layers: {ids: [2, 40]}\n")
    err = SpecError(str(path), [Problem("draft.fusion.aux_layers", "outside"),
                                Problem("draft.fusion.num_aux", "missing key: its parent's line"),
                                Problem("draft config num_aux_hidden_states", "no place in the spec"),
                                Problem("checkpoints.target", "no part of it in the file"),
                                Problem("", "the top: no path, no line")])
    lines = {p.path: p.line for p in err.problems}
    assert lines == {"draft.fusion.aux_layers": 6, "draft.fusion.num_aux": 3,
                     "draft config num_aux_hidden_states": None, "checkpoints.target": None, "": None}
    assert [p.path for p in err.problems][:2] == ["draft.fusion.num_aux", "draft.fusion.aux_layers"]
    for source in ("draft fusion", "<spec x>", str(tmp_path / "missing.yaml"), str(tmp_path), "a\0b.yaml"):
        assert SpecError(source, [Problem("draft.fusion", "m")]).problems[0].line is None


def test_out_of_range_aux_layers_found_against_the_target_name_their_line(tmp_path):
    target = write_target(tmp_path / "t", "llama", num_hidden_layers=8)
    draft = write_eagle3(tmp_path / "d", target)
    text = edited(LLAMA, **{"name: eagle3-llama": "name: taps",
                            "aux_layers: {at: input}": "aux_layers: {ids: [2, 4, 40], at: input}"})
    path = tmp_path / "taps.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(path, target=target, draft=draft)
    (p,) = info.value.problems
    assert p.path == "draft.fusion.aux_layers.ids" and "outside the target's 8 layers" in p.message
    assert p.line == line_of(text, "aux_layers:") and f"(line {p.line})" in str(info.value)
