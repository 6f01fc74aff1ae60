"""Plant small bugs in one module, one at a time, and report the ones the tests miss.

    python scripts/mutate.py draftsmith/decoding/fixed.py tests/decoding [--lines 40-120] [--work DIR] [--fork]

Each mutant changes one AST node (a comparison, an arithmetic operator, an integer constant by one, a boolean
constant, ``and``/``or``, a unary minus dropped) and runs the given tests with ``-x`` in a copy of the checkout
(``--work``, default a temporary folder), so the checkout itself is never modified and two runs can share a machine.
mutmut instruments every function with a trampoline that reads the environment, which torch.compile's fullgraph
tracing (tests/decoding/test_fused_step.py) refuses; planting into a copy keeps the code under test as it ships.
Survivors are printed as ``file:line  before -> after``; some are equivalent mutants (read them before adding a test).

``--fork`` (5-10x faster): the module and the tests' imports load once; each mutant runs in a forked child that
swaps the mutated function's code object (compiled from the mutant) into the live function, so every reference to
it sees the mutant. Sites outside a plain function body (defaults, decorators, class attributes, functions behind
a wrapper such as ``lru_cache``) and every survivor run the slow way too, so a survivor is never an artefact.
"""
from __future__ import annotations

import argparse
import ast
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
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
    notes += [f.returns for f in ast.walk(tree) if isinstance(f, FUNCS) and f.returns]
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


def owners(tree: ast.Module) -> dict[int, str]:
    """id(node) -> the qualified name of the module-level function or method whose body holds the node."""
    defs = [(f.name, f) for f in tree.body if isinstance(f, FUNCS)]
    defs += [(f"{c.name}.{f.name}", f) for c in tree.body if isinstance(c, ast.ClassDef)
             for f in c.body if isinstance(f, FUNCS)]
    return {id(n): name for name, f in defs for stmt in f.body for n in ast.walk(stmt)}


def code_named(code: types.CodeType, qualname: str) -> types.CodeType | None:
    """The code object called ``qualname`` among ``code``'s nested constants (co_qualname: Python >= 3.11)."""
    todo = [code]
    while todo:
        c = todo.pop()
        if getattr(c, "co_qualname", None) == qualname:
            return c
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return None


def live_function(module: types.ModuleType, qualname: str) -> types.FunctionType | None:
    """The plain function object behind ``qualname`` (a property's getter, a static or class method's function),
    or None where a wrapper stands in its place."""
    obj = module
    for part in qualname.split("."):
        obj = (obj.__dict__ if isinstance(obj, type) else vars(obj)).get(part)
    obj = getattr(obj, "fget", None) or getattr(obj, "__func__", None) or obj
    ok = isinstance(obj, types.FunctionType) and getattr(obj.__code__, "co_qualname", None) == qualname
    return obj if ok else None


def module_name(path: str) -> str:
    """The import name of a module path: ``a/b.py`` -> ``a.b``; a package's ``a/__init__.py`` is ``a`` itself
    (imported as ``a.__init__`` it would be a second module, whose swapped code no caller reaches)."""
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


class Forked:
    """Runs pytest in forked children of a process that imported the module (from ``work``) and the tests' imports
    once; ``run(qualname, mutant)`` swaps the mutant's code into that one function, or returns None when it cannot."""

    def __init__(self, module: str, work: Path, args: list[str], timeout: int, memory: float):
        import gc
        import importlib
        import pkgutil

        os.chdir(work)
        sys.path.insert(0, str(work))
        sys.dont_write_bytecode = True
        self.module = importlib.import_module(module_name(module))
        if not Path(self.module.__file__).resolve().is_relative_to(work.resolve()):
            raise SystemExit(f"--fork imported {self.module.__file__}, not the copy in {work}: uninstall the "
                             "editable install or run without --fork")
        import pytest  # noqa: F401  (imported once here, not in every child)

        package = importlib.import_module(self.module.__name__.split(".")[0])
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):  # runs a CLI on import
                continue
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 (an optional dependency: the child imports it as the tests do)
                pass
        self.path, self.args, self.timeout, self.memory = str(work / module), args, timeout, memory
        gc.collect()
        gc.freeze()  # children share the import heap instead of copying it on their first collection

    def run(self, qualname: str | None, mutant: str | None) -> int | None:
        if qualname is not None:
            fn = live_function(self.module, qualname)
            new = code_named(compile(mutant, self.path, "exec"), qualname)
            if fn is None or new is None or new.co_freevars != fn.__code__.co_freevars:
                return None
        pid = os.fork()
        if pid == 0:
            import pytest

            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1), os.dup2(null, 2)
            cap_memory(self.memory)
            if qualname is not None:
                fn.__code__ = new
            os._exit(int(pytest.main(self.args)))
        start = time.time()
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.time() - start > self.timeout:  # a hang is caught too
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return -1
            time.sleep(0.02)


def cap_memory(gib: float) -> None:
    """Cap the data this process (a test run) may allocate at ``gib`` GiB (RLIMIT_DATA: the heap and private
    writable mappings, torch's tensors included); 0: no cap. A mutant that loops appending (a piece cut that never
    advances) reached 18.6 GB of a shared 24 GB machine in six minutes, under the time limit."""
    if gib > 0:
        limit = int(gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("module"), ap.add_argument("tests", nargs="+")
    ap.add_argument("--lines", help="only lines A-B"), ap.add_argument("--work", help="copy of the checkout")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--memory", type=float, default=8, help="GiB of data a test run may allocate (a mutant that "
                    "allocates without end fails, killed, before it takes the machine's memory); 0: no cap")
    ap.add_argument("--fork", action="store_true", help="one import, a forked child per mutant (POSIX)")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    work = Path(args.work or tempfile.mkdtemp(prefix="mutate-"))
    shutil.copytree(root, work, dirs_exist_ok=True,  # refreshed each run: a reused --work gets today's tests
                    ignore=shutil.ignore_patterns(".git", "wheels", "gguf-parts", "__pycache__", "*.egg-info"))
    target, src = work / args.module, (root / args.module).read_text()
    tree = ast.parse(src)
    base = ast.unparse(tree).splitlines()  # the mutants' formatting, to find the changed line
    lines = range(int(args.lines.split("-")[0]), int(args.lines.split("-")[1]) + 1) if args.lines else None
    todo, nodes, owner = sites(tree, lines), list(ast.walk(tree)), owners(tree) if args.fork else {}
    env = {**os.environ, "PYTHONPATH": str(work), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    pytest_args = ["-x", "-q", "-p", "no:cacheprovider", *args.tests]
    target.write_text(src)

    def slow(mutant: str) -> int:
        target.write_text(mutant)
        try:
            return subprocess.run([sys.executable, "-m", "pytest", *pytest_args], cwd=work, env=env,
                                  capture_output=True, timeout=args.timeout,
                                  preexec_fn=lambda: cap_memory(args.memory)).returncode
        except subprocess.TimeoutExpired:
            return -1  # a hang is caught too
        finally:
            target.write_text(src)

    if (rc := slow(src)) != 0:
        print(f"the tests {'outran --timeout' if rc == -1 else 'fail'} in {work} before any mutation; nothing to "
              "measure")
        return 1
    if args.fork:
        os.environ.update(env)
        forked = Forked(args.module, work, pytest_args, args.timeout, args.memory)
        if forked.run(None, None) != 0:
            print("the tests fail in a forked child before any mutation: run without --fork")
            return 1
    survived, timed_out = [], []
    for n, (index, how, line) in enumerate(todo, 1):
        mutant = mutant_source(src, index, how)
        qualname = owner.get(id(nodes[index]))
        rc = forked.run(qualname, mutant) if qualname else None
        if not rc:  # not forkable, or a survivor: confirmed in a fresh interpreter
            rc = slow(mutant)
        changed = next((b, m) for b, m in zip(base, mutant.splitlines() + [""]) if b != m)
        before, after = (s.strip() for s in changed)
        said = f"{args.module}:{line}  {how}  {before}  ->  {after}"
        if rc == 0:
            survived.append(said)
        elif rc == -1:   # a hang, or a loaded machine: counted killed, listed to be checked by hand
            timed_out.append(said)
        word = "SURVIVED" if rc == 0 else "killed (timeout)" if rc == -1 else "killed"
        print(f"[{n}/{len(todo)}] {word} {args.module}:{line} {how}", flush=True)
    print(f"\n{len(todo) - len(survived)} of {len(todo)} mutants killed ({len(timed_out)} by the timeout alone: "
          "a hang, or a loaded machine; check those by hand); survivors:")
    print("\n".join(survived) or "  none")
    if timed_out:
        print("killed by the timeout alone:\n" + "\n".join(timed_out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
