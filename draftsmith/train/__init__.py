"""Train the draft a spec declares against a target folder (``draftsmith train``).

data.py (text / JSONL / the stdlib -> token windows), features.py (the frozen target's features, cached on disk),
ttt.py (training-time test through the assembled draft), loop.py (optimiser, progress, resumable checkpoints),
draft_io.py (initial draft and export in the spec's layout), evaluate.py (held-out acceptance per position),
pipeline.py (all of it in order)."""
from draftsmith.train.loop import TrainConfig
from draftsmith.train.pipeline import Job, run

__all__ = ["Job", "TrainConfig", "run"]
