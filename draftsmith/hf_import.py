"""transformers, made ready once under a lock.

draftsmith imports transformers where it first needs it (``import draftsmith`` and ``--help`` load no torch or
transformers). transformers' top-level module is lazy: a name is imported on first access, and two threads
doing that at once fail with ``ImportError: cannot import name 'AutoConfig' from 'transformers'`` (transformers
5.x; vLLM issue 40442). So the first :func:`draftsmith.assemble` of a process resolves, under one lock, every
transformers name draftsmith uses; later accesses read the names the lazy module has kept.
"""
from __future__ import annotations

import importlib
import threading

NAMES = ("AutoConfig", "AutoModelForCausalLM", "AutoTokenizer", "CONFIG_MAPPING", "LlamaConfig", "PretrainedConfig",
         "PreTrainedTokenizerFast")
MODULES = ("transformers.modeling_rope_utils", "transformers.utils.logging")

_lock = threading.Lock()
_ready = False


def ready_transformers() -> None:
    """Import transformers and resolve the names draftsmith uses, once per process, one thread at a time."""
    global _ready
    if _ready:
        return
    with _lock:
        if _ready:
            return
        import transformers

        for name in NAMES:
            getattr(transformers, name)
        for module in MODULES:
            importlib.import_module(module)
        _ready = True
