"""scripts/mutate.py: each mutant changes exactly one node, and every kind of site is found."""
import ast
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mutate.py"
spec = importlib.util.spec_from_file_location("mutate", SCRIPT)
mutate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutate)

SRC = '''def f(x: int = 3, flag: bool = True):
    if x < 2 and flag:
        return -x
    return x * 4 + 1
'''


def all_mutants(src):
    return [(line, mutate.mutant_source(src, i, how)) for i, how, line in mutate.sites(ast.parse(src), None)]


def test_each_mutant_differs_from_the_source_in_one_place():
    base = ast.unparse(ast.parse(SRC)).splitlines()
    got = all_mutants(SRC)
    for _, m in got:
        changed = [(b, x) for b, x in zip(base, m.splitlines()) if b != x]
        assert len(changed) == 1, m
    bodies = {m for _, m in got}
    assert len(bodies) == len(got)                                     # no two sites give the same mutant
    texts = "\n".join(m for _, m in got)
    for expected in ("x: int=4", "x: int=2", "flag: bool=False", "x <= 2", "x < 3", "x < 2 or flag",
                     "        return x\n", "x // 4", "x * 4 - 1", "x * 5", "x * 4 + 2", "x * 4 + 0"):
        assert expected in texts, expected


def test_annotations_are_not_mutated_and_lines_can_be_chosen():
    src = "def g(n: 'Literal[1]' = 0) -> int | None:\n    return n\n\n\ndef h():\n    return 1 < 2\n"
    assert [how for _, how, _ in mutate.sites(ast.parse(src), None)] == ["+1", "op0", "+1", "-1", "+1", "-1"]
    assert {line for _, _, line in mutate.sites(ast.parse(src), range(5, 7))} == {6}


FORKABLE = '''import functools


def plain(x):
    return x + 1


@functools.lru_cache
def cached(x):
    return x + 1


class C:
    @property
    def p(self):
        return 1 < 2

    @staticmethod
    def s():
        def inner():
            return 3
        return inner()
'''


def test_fork_mode_finds_the_function_to_swap_or_declines(tmp_path):
    tree = ast.parse(FORKABLE)
    owner = mutate.owners(tree)
    by_line = {getattr(n, "lineno", 0): owner.get(id(n)) for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert by_line[5] == "plain" and by_line[10] == "cached" and by_line[16] == "C.p" and by_line[21] == "C.s"
    code = compile(FORKABLE, "m.py", "exec")
    assert mutate.code_named(code, "C.s").co_qualname == "C.s" and mutate.code_named(code, "nope") is None
    path = tmp_path / "forkable_mod.py"
    path.write_text(FORKABLE)
    spec = importlib.util.spec_from_file_location("forkable_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert mutate.live_function(module, "plain") is module.plain
    assert mutate.live_function(module, "C.p") is module.C.p.fget
    assert mutate.live_function(module, "C.s") is module.C.s
    assert mutate.live_function(module, "cached") is None      # a wrapper: its mutants run the slow way


def test_fork_mode_imports_a_package_init_as_the_package():
    assert mutate.module_name("draftsmith/testing/__init__.py") == "draftsmith.testing"
    assert mutate.module_name("draftsmith/decoding/tree.py") == "draftsmith.decoding.tree"
    assert mutate.module_name("draftsmith/init_weights.py") == "draftsmith.init_weights"
