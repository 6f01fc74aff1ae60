"""Plant small bugs in one module, one at a time, and report the ones the tests miss.

    python scripts/mutate.py draftsmith/decoding/fixed.py tests/decoding [--lines 40-120] [--work DIR]

Each mutant changes one AST node (a comparison, an arithmetic operator, an integer constant by one, a boolean
constant, ``and``/``or``, a unary minus dropped) and runs the given tests with ``-x`` in a copy of the checkout
(``--work``, default a temporary folder), so the checkout itself is never modified and two runs can share a machine.
mutmut instruments every function with a trampoline that reads the environment, which torch.compile's fullgraph
tracing (tests/decoding/test_fused_step.py) refuses; planting into a copy keeps the code under test as it ships.
Survivors are printed as ``file:line  before -> after``; some are equivalent mutants (read them before adding a test).
"""
from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
         ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
         ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
         ast.Mod: ast.FloorDiv, ast.And: ast.Or, ast.Or: ast.And, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd}


def mutations(node: ast.AST) -> list[str]:
    """The mutations this node admits, by name (applied by :func:`apply`)."""
    if isinstance(node, ast.Compare):
        return [f"op{i}" for i, op in enumerate(node.ops) if type(op) in SWAPS]
    if isinstance(node, (ast.BinOp, ast.BoolOp)) and type(node.op) in SWAPS:
        return ["op"]
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        return ["not"]
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return ["+1", "-1"] if node.value else ["+1"]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        return ["drop"]
    return []


def apply(node: ast.AST, how: str) -> ast.AST:
    """Mutate ``node`` in place (or return its replacement)."""
    if how.startswith("op") and isinstance(node, ast.Compare):
        i = int(how[2:])
        node.ops[i] = SWAPS[type(node.ops[i])]()
    elif how == "op":
        node.op = SWAPS[type(node.op)]()
    elif how == "not":
        node.value = not node.value
    elif how in ("+1", "-1"):
        node.value += 1 if how == "+1" else -1
    elif how == "drop":
        return node.operand
    return node


def sites(tree: ast.Module, lines: range | None) -> list[tuple[int, str, int]]:
    """(index in ast.walk order, mutation, line) for every site, skipping docstrings and annotations."""
    notes = [a.annotation for a in ast.walk(tree) if isinstance(a, (ast.arg, ast.AnnAssign)) and a.annotation]
    notes += [f.returns for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.returns]
    skip = {id(n) for note in notes for n in ast.walk(note)}
    out = []
    for i, node in enumerate(ast.walk(tree)):
        line = getattr(node, "lineno", 0)
        if id(node) in skip or (lines and line not in lines):
            continue
        out += [(i, how, line) for how in mutations(node)]
    return out


def mutant_source(src: str, index: int, how: str) -> str:
    tree = ast.parse(src)
    for i, node in enumerate(ast.walk(tree)):
        if i == index:
            new = apply(node, how)
            if new is not node:  # swap the node in its parent
                for parent in ast.walk(tree):
                    for field, value in ast.iter_fields(parent):
                        if value is node:
                            setattr(parent, field, new)
                        elif isinstance(value, list) and node in value:
                            value[value.index(node)] = new
            return ast.unparse(tree)
    raise IndexError(index)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("module"), ap.add_argument("tests", nargs="+")
    ap.add_argument("--lines", help="only lines A-B"), ap.add_argument("--work", help="copy of the checkout")
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    work = Path(args.work or tempfile.mkdtemp(prefix="mutate-"))
    if not (work / "draftsmith").is_dir():
        shutil.copytree(root, work, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".git", "wheels", "gguf-parts", "__pycache__", "*.egg-info"))
    target, src = work / args.module, (root / args.module).read_text()
    base = ast.unparse(ast.parse(src)).splitlines()  # the mutants' formatting, to find the changed line
    lines = range(int(args.lines.split("-")[0]), int(args.lines.split("-")[1]) + 1) if args.lines else None
    todo = sites(ast.parse(src), lines)
    env = {**os.environ, "PYTHONPATH": str(work), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    run = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args.tests]
    target.write_text(src)
    if subprocess.run(run, cwd=work, env=env, capture_output=True).returncode != 0:
        print(f"the tests fail in {work} before any mutation; nothing to measure")
        return 1
    survived = []
    try:
        for n, (index, how, line) in enumerate(todo, 1):
            mutant = mutant_source(src, index, how)
            target.write_text(mutant)
            try:
                rc = subprocess.run(run, cwd=work, env=env, capture_output=True, timeout=args.timeout).returncode
            except subprocess.TimeoutExpired:
                rc = -1  # a hang is caught too
            changed = next((b, m) for b, m in zip(base, mutant.splitlines() + [""]) if b != m)
            before, after = (s.strip() for s in changed)
            status = "killed" if rc != 0 else "SURVIVED"
            if rc == 0:
                survived.append(f"{args.module}:{line}  {how}  {before}  ->  {after}")
            print(f"[{n}/{len(todo)}] {status} {args.module}:{line} {how}", flush=True)
    finally:
        target.write_text(src)
    print(f"\n{len(todo) - len(survived)} of {len(todo)} mutants killed; survivors:")
    print("\n".join(survived) or "  none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
