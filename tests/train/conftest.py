import json
import shutil
from pathlib import Path

import pytest

from draftsmith.testing import write_target
from draftsmith.train import data as D

FILES = ["bisect.py", "colorsys.py", "heapq.py", "keyword.py"]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A tiny random Llama target with the byte tokenizer, and a few stdlib files as training text."""
    root = tmp_path_factory.mktemp("train")
    write_target(root / "target", tokenizer=True)
    (root / "data").mkdir()
    for name in FILES:
        shutil.copy(D.stdlib_dir() / name, root / "data" / name)
    return root


@pytest.fixture
def job(tiny):
    """job(out, **overrides) -> a small draftsmith.train.Job on the tiny target."""
    return lambda out, **kw: make_job(tiny, out, **kw)


def make_job(tiny: Path, out: Path, **kw):
    from draftsmith.train import Job, TrainConfig

    cfg = TrainConfig(**{"steps": 12, "batch": 2, "lr": 3e-3, "save_every": 4, **kw.pop("config", {})})
    return Job(spec=kw.pop("spec", "eagle3-llama"), target=kw.pop("target", tiny / "target"), out=out,
               data=kw.pop("data", [tiny / "data"]), held_out=[tiny / "data" / "heapq.py"],
               draft_vocab=kw.pop("draft_vocab", 96), seq=kw.pop("seq", 48),
               max_windows=kw.pop("max_windows", 24), eval_prompts=kw.pop("eval_prompts", 0), config=cfg, **kw)


@pytest.fixture
def chats(tmp_path):
    """A JSONL file of 12 two-turn chat records, and the turns of record i."""
    f = tmp_path / "chats" / "talk.jsonl"
    f.parent.mkdir()
    turns = lambda i: [{"role": "user", "content": f"question {i}: " + "why? " * 20},   # noqa: E731
                       {"role": "assistant", "content": f"answer {i}: " + "because. " * 20}]
    f.write_text("".join(json.dumps({"messages": turns(i)}) + "\n" for i in range(12)))
    return f, turns
