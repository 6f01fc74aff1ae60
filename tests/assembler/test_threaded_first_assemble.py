"""The first assemble() calls of a process, made at once from threads, all load: transformers' lazy top-level
import is not thread-safe (two threads asking it for AutoConfig at once got ImportError), so draftsmith makes it
ready once under a lock (draftsmith.hf_import). Needs a fresh process: pytest's has imported transformers."""
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import threading
    import draftsmith
    errors = []
    def load():
        try:
            draftsmith.assemble("demo")
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("errors:", errors)
""")


def test_first_assembles_from_threads_all_load():
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "errors: []" in res.stdout, res.stdout[-2000:]


@pytest.mark.parametrize("calls", [1, 3])
def test_ready_transformers_resolves_the_names_once(calls, monkeypatch):
    import transformers

    from draftsmith import hf_import

    monkeypatch.setattr(hf_import, "_ready", False)
    for _ in range(calls):
        hf_import.ready_transformers()
    assert hf_import._ready and all(name in vars(transformers) for name in hf_import.NAMES)
