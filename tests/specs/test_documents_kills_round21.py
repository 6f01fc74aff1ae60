"""Kills for specs/documents.py survivors (round 21b): the YAML_NODES count (values, not keys; a mapping inside a
top-level list counted too; the line said is the value's that passes the bound) and PyYAML's own nesting bound
(PyYAML >= 6.0.4) said as ours."""
from __future__ import annotations

import pytest
import yaml

from draftsmith import limits
from draftsmith.errors import SpecError
from draftsmith.specs import documents
from draftsmith.specs.documents import load_yaml_text


def refusal(text: str) -> str:
    with pytest.raises(SpecError) as info:
        load_yaml_text(text, "s.yaml")
    [p] = info.value.problems
    return p.message


def test_the_value_that_passes_the_node_bound_is_said_at_its_own_line():
    """Values are counted, not keys: the root, ``a``'s list and its items reach YAML_NODES exactly; ``b``'s value,
    written on the line after its key, is the one past the bound (line 3), not the key (line 2)."""
    items = limits.YAML_NODES - 2
    text = "a: [" + ", ".join(["0"] * items) + "]\nb:\n  1\n"
    assert refusal(text) == f"more than {limits.YAML_NODES} values by line 3 (a spec has about 50)"
    assert load_yaml_text("a: [" + ", ".join(["0"] * items) + "]\n") == {"a": [0] * items}   # at the bound: read


def test_a_mapping_inside_a_top_level_list_is_counted_too():
    """A document that is a list holding one mapping of YAML_NODES entries is refused by the count before it is
    built (the mapping's values were not counted when the list, not the mapping, was looked at)."""
    entries = ", ".join(f"k{i}: 0" for i in range(limits.YAML_NODES))
    assert refusal(f"- {{{entries}}}\n").startswith(f"more than {limits.YAML_NODES} values by line 1")


def test_pyyamls_own_nesting_bound_is_said_as_ours(monkeypatch):
    """PyYAML >= 6.0.4 stops at its own nesting bound before our count sees the 33rd level: its error, with a mark,
    is said as our depth refusal at the mark's line (simulated: the installed PyYAML may be older)."""
    def parse(*args, **kwargs):
        raise yaml.scanner.ScannerError(problem="exceeded max nesting depth",
                                        problem_mark=yaml.Mark("s.yaml", 0, 6, 0, None, None))
        yield   # a generator, as yaml.parse is

    monkeypatch.setattr(documents.yaml, "parse", parse)
    assert refusal("a: 1\n") == f"nesting deeper than {limits.YAML_DEPTH} levels (line 7)"


def test_a_spec_longer_than_its_stated_size_is_refused_not_cut(tmp_path, monkeypatch):
    """read_text bounded a spec by its stat size and then read SPEC_BYTES + 1 bytes without checking them: a file
    longer than its size says (one that grew since the stat, a /proc file whose size is 0) was cut and parsed."""
    import os
    import pathlib

    import pytest

    from draftsmith import limits
    from draftsmith.errors import SpecError
    from draftsmith.specs.documents import read_text

    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\n" + "#" * (2 * limits.SPEC_BYTES) + "\n")
    real = pathlib.Path.stat
    monkeypatch.setattr(pathlib.Path, "stat", lambda self, **kw: os.stat_result((0o100644, 0, 0, 1, 0, 0, 8, 0, 0, 0))
                        if self == spec else real(self, **kw))
    with pytest.raises(SpecError, match=f"the file is more than {limits.SPEC_BYTES} bytes; a spec is at most"):
        read_text(spec)
