"""Mutation survivors of assembler/plan.py (round 27): CheckpointMismatch's message budget, each bound written here
by hand (SHOWN_CHARS = 4000 characters of problem lines, each line cut to LINE_CHARS = 1000)."""
from draftsmith.assembler.plan import CheckpointMismatch


def _lines(error: CheckpointMismatch) -> list[str]:
    return str(error).split("\n  ")[1:]   # past the header


def test_problem_lines_filling_exactly_4000_characters_are_all_shown():
    """Lines of 1000, 1000, 1000 and 999 characters, then one of 1: 4000 characters in all, so every line is shown
    and nothing is counted as more (a budget of 3999 would count the last)."""
    problems = ["a" * 1000] * 3 + ["c" * 999, "b"]
    shown = _lines(CheckpointMismatch(problems))
    assert shown == problems
    assert "more" not in str(CheckpointMismatch(problems))


def test_a_line_past_4000_characters_is_counted_not_shown():
    """Four lines of 1000 characters fill the 4000: a fifth of one character is 'and 1 more' (a budget of 4001
    would show it)."""
    problems = ["a" * 1000] * 4 + ["b"]
    error = CheckpointMismatch(problems)
    assert _lines(error) == ["a" * 1000] * 4 + ["... and 1 more"]
    assert error.problems == problems   # every line stays in .problems


def test_a_line_of_1000_characters_is_shown_whole_and_one_of_1001_is_cut():
    """LINE_CHARS is 1000: a line of exactly 1000 characters is shown as it is; one of 1001 is cut in the middle
    to 999 (498 + '...' + 498)."""
    long = "x" * 500 + "y" * 501
    shown = _lines(CheckpointMismatch(["w" * 1000, long]))
    assert shown[0] == "w" * 1000
    assert shown[1] == "x" * 498 + "..." + "y" * 498


def test_a_shape_is_written_whole_up_to_100_characters_and_cut_past_them():
    """A missing tensor's shape is written in at most 100 characters: [1, ..., 1, 10] (100 characters) whole, and
    [10, 10, 1, ..., 1] (101) cut in the middle to 99 (48 + '...' + 48)."""
    import torch

    from draftsmith.assembler.plan import Expected, plan_load
    from draftsmith.components.weights import RuleSet

    s100, s101 = (1,) * 32 + (10,), (10, 10) + (1,) * 31
    whole, long = "[" + ", ".join(map(str, s100)) + "]", "[" + ", ".join(map(str, s101)) + "]"
    assert (len(whole), len(long)) == (100, 101)
    try:
        plan_load({}, RuleSet([]), {"a": Expected(s100, torch.float32), "b": Expected(s101, torch.float32)})
    except CheckpointMismatch as e:
        problems = e.problems
    else:
        raise AssertionError("two missing tensors were not refused")
    assert problems == [f"missing: 'a' {whole} float32", f"missing: 'b' {long[:48]}...{long[-48:]} float32"]


def _unexpected_line(replace: str) -> str:
    import torch

    from draftsmith.assembler.checkpoint import TensorInfo
    from draftsmith.assembler.plan import Expected, plan_load
    from draftsmith.components.weights import RegexRule, RuleSet

    infos = {"a": TensorInfo("a", (2,), torch.float32, None)}
    try:
        plan_load(infos, RuleSet([RegexRule(match="^a", replace=replace)]), {"b": Expected((2,), torch.float32)},
                  optional=["b"])
    except CheckpointMismatch as e:
        (line,) = e.problems
        return line
    raise AssertionError("an unexpected tensor was not refused")


def test_a_rule_is_named_whole_up_to_300_characters_and_cut_past_them():
    """The rule a problem line names is written in at most 300 characters: "rule 0: '^a' -> 'x...x'" with 282 x's
    (300 characters) whole, and with 283 (301) cut in the middle to 299 (148 + '...' + 148)."""
    whole = "rule 0: '^a' -> '" + "x" * 282 + "'"
    assert len(whole) == 300
    assert _unexpected_line("x" * 282).endswith(f" via {whole}")
    long = "rule 0: '^a' -> '" + "x" * 283 + "'"
    assert _unexpected_line("x" * 283).endswith(f" via {long[:148]}...{long[-148:]}")


def test_the_header_names_the_checkpoint_in_300_characters_and_the_spec_in_100():
    """The header cuts the checkpoint's name past 300 characters (to 299: 148 + '...' + 148) and the spec's past
    100 (to 99: 48 + '...' + 48); names of exactly 300 and 100 characters are written whole."""
    def header(where: str, spec: str) -> str:
        return str(CheckpointMismatch(["p"], where=where, spec=spec)).split("\n")[0]

    w300, s100 = "w" * 150 + "W" * 150, "s" * 50 + "S" * 50
    assert header(w300, s100) == f"{w300} does not fit spec '{s100}': 1 problem"
    w301, s101 = w300 + "W", s100 + "S"
    assert header(w301, s101) == (f"{w301[:148]}...{w301[-148:]} does not fit spec '{s101[:48]}...{s101[-48:]}': "
                                  "1 problem")
