"""draftsmith's import graph is a tree of layers: no module and no subpackage reaches itself through imports,
counting the imports inside functions too (a lazy import hides a circle from Python, not from a reader).

Layers, low to high: errors and hooks; components and the registry; specs; decoding; assembler; convert,
train, doctor, bench; builtin (the built-in plugin, which the registry imports by name); cli."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import draftsmith

ROOT = Path(draftsmith.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The draftsmith modules ``path`` imports anywhere in its body (``from a import b`` names ``a.b`` when that
    is a module, else ``a``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                      for a in node.names}
    return {m for m in found if m in modules}


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    return {m: imports(p, set(files)) - {m} for m, p in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_modules_import_no_circle():
    assert cycles(graph()) == []


def test_subpackages_import_no_circle():
    edges = defaultdict(set)
    for m, targets in graph().items():
        edges[package(m)] |= {package(t) for t in targets} - {package(m)}
    found = cycles(dict(edges))
    assert found == [], f"subpackages that import each other: {found}"


def test_the_graph_sees_lazy_imports():
    # the registry's dependence on the specs layer above it would hide in a function body
    assert "draftsmith.assembler.detect" in graph()["draftsmith.builtin"]


def test_the_cli_starts_without_importing_transformers():
    """transformers costs ~2 s to import: a spec or option error (and --help) does not wait for it; the modules
    that need it import it where they use it."""
    import subprocess
    import sys

    code = "import sys, draftsmith.cli; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
