"""The embedded demo pair, built on first use into a cache folder (``DRAFTSMITH_CACHE``, default
``~/.cache/draftsmith``). Random weights, built deterministically: nothing is downloaded."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

DEMO_VERSION = "random-v1"
DEMO_TARGET = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
                   num_hidden_layers=8, max_position_embeddings=2048, bos_token_id=256, eos_token_id=257,
                   vocab_size=258, tie_word_embeddings=False)
IS_RANDOM = True


def cache_root() -> Path:
    return Path(os.environ.get("DRAFTSMITH_CACHE", Path.home() / ".cache" / "draftsmith"))


def builtin_checkpoint(ref: str) -> Path:
    """``demo/target`` or ``demo/draft``: the folder, built atomically if missing."""
    name, _, part = ref.partition("/")
    if name != "demo" or part not in ("target", "draft"):
        raise FileNotFoundError(f"no built-in checkpoint {ref!r}; known: demo/target, demo/draft")
    root = cache_root() / f"demo-{DEMO_VERSION}"
    if not (root / "draft" / "config.json").is_file():
        _build(root)
    return root / part


def _build(root: Path) -> None:
    from draftsmith.testing import write_eagle3, write_target

    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=".demo-"))
    write_target(tmp / "target", "llama", seed=1234, tokenizer=True, **DEMO_TARGET)
    write_eagle3(tmp / "draft", tmp / "target", seed=4321, draft_vocab=192)
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
