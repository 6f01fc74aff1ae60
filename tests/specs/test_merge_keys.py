"""YAML merge keys in specs, as YAML's merge type states them and whatever PyYAML is installed (6.0.3 and 6.0.4
order merge lists differently): a mapping's own keys override merged ones, and in ``<<: [*a, *b]`` an earlier
mapping's keys override a later one's. The expected data is worked out here from the documents' structure, not by a
YAML library."""
import random

import pytest

from draftsmith.errors import SpecError
from draftsmith.specs.documents import load_yaml_text

KEYS = ["x", "y", "z", "w"]


def document(rng: random.Random) -> tuple[str, dict]:
    """Anchored mappings, each merging earlier ones (one alias, or a list) and stating keys of its own; with the
    data the merge type gives them."""
    lines, data = [], {}
    for i in range(rng.randint(2, 7)):
        parts, merged = [], {}
        if data and rng.random() < 0.8:
            sources = rng.sample(sorted(data), rng.randint(1, min(3, len(data))))
            one = len(sources) == 1 and rng.random() < 0.5
            parts.append("<<: " + (f"*{sources[0]}" if one else "[" + ", ".join(f"*{s}" for s in sources) + "]"))
            for source in reversed(sources):   # an earlier mapping overrides a later one
                merged.update(data[source])
        own = {k: rng.randint(0, 9) for k in rng.sample(KEYS, rng.randint(0, 3))}
        parts += [f"{k}: {v}" for k, v in own.items()]
        lines.append(f"m{i}: &m{i} {{{', '.join(parts)}}}")
        data[f"m{i}"] = merged | own   # its own keys override merged ones
    return "\n".join(lines) + "\n", data


def test_merges_load_as_the_merge_type_states():
    rng = random.Random(7)
    for _ in range(400):
        text, want = document(rng)
        assert load_yaml_text(text) == want, text


def test_the_order_of_a_merge_list_decides_and_own_keys_win():
    text = "a: &a {x: 1, y: 1}\nb: &b {x: 2, z: 2}\nm: {<<: [*a, *b], z: 3}\nn: {<<: [*b, *a]}\n"
    data = load_yaml_text(text)
    assert data["m"] == {"x": 1, "y": 1, "z": 3} and data["n"] == {"x": 2, "y": 1, "z": 2}


@pytest.mark.parametrize("text, found", [("a: 1\nm: {<<: *a}\n".replace("a: 1", "a: &a 1"), "found a scalar"),
                                         ("a: &a [1]\nm: {<<: [*a]}\n", "found a sequence")])
def test_a_merge_of_no_mapping_is_refused(text, found):
    with pytest.raises(SpecError, match=f"expected a mapping or a list of mappings to merge, but {found}"):
        load_yaml_text(text)


def test_merges_are_bounded_like_the_rest_of_a_spec():
    """The pairs merges add count against YAML_NODES (150 mappings each merging 200 keys: 30,000), merge chains
    against YAML_DEPTH, and a mapping that merges itself is refused; each a SpecError before the data is built.
    A mapping merged many times in one list counts once (the first copy wins anyway)."""
    from draftsmith import limits

    keys = "{" + ", ".join(f"k{i}: {i}" for i in range(200)) + "}"
    with pytest.raises(SpecError, match=f"more than {limits.YAML_NODES} values with merges expanded, by line 2 "):
        load_yaml_text(f"m: &m {keys}\nl: [" + ", ".join(["{<<: *m}"] * 150) + "]\n")
    data = load_yaml_text(f"m: &m {keys}\nn: {{<<: [" + ", ".join(["*m"] * 5000) + "]}\n")
    assert data["n"] == data["m"] and len(data["n"]) == 200
    # PyYAML fills nested mappings after their parents: top's merge flattens the whole chain at once (40 deep)
    chain = "d:\n  d:\n    m0: &m0 {a: 1}\n" + "".join(f"    m{i}: &m{i} {{<<: *m{i - 1}}}\n" for i in range(1, 40))
    with pytest.raises(SpecError, match=f"merges chained deeper than {limits.YAML_DEPTH} levels \\(line 4\\)"):
        load_yaml_text(chain + "top: {<<: *m32}\n")   # top, then m32 .. m1 (line 4): 33 merges open at once
    assert load_yaml_text(chain + "top: {<<: *m31}\n")["top"] == {"a": 1}   # 32: the bound itself
    with pytest.raises(SpecError, match=r"a mapping merges itself \(line 1\)"):
        load_yaml_text("a: &a {<<: *a, x: 1}\n")


@pytest.mark.parametrize("text, want", [("m: {=: 1}\n", {"m": {"=": 1}}), ("a: 1\n=: 2\n", {"a": 1, "=": 2}),
                                        ("m: {<<: [], y: 2}\n", {"m": {"y": 2}})])
def test_a_value_key_and_an_empty_merge_load_as_yaml_reads_them(text, want):
    assert load_yaml_text(text) == want
