"""What the data a run read gives that it cannot train on, said after the documents are read and encoded (the
checks before any work are :mod:`draftsmith.train.preflight`'s): ids past the target's vocabulary, no window of
--seq tokens, and what was skipped on the way."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from draftsmith.errors import count, short_list, short_text
from draftsmith.train import records as R
from draftsmith.train.checks import TrainError
from draftsmith.train.preflight import target_size


def ids_outside(job, ids: torch.Tensor, what: str = "the data") -> TrainError | None:
    """The ids the target's tokenizer gave that its embedding has no row for (a tokenizer that is not the target's,
    or ids past a trimmed vocabulary), before the target reads them; None where all fit or the vocabulary is not
    known here."""
    vocab = target_size(job, "vocab_size")
    if vocab is None or not len(ids) or (0 <= int(ids.min()) and int(ids.max()) < vocab):
        return None
    outside = ids[(ids < 0) | (ids >= vocab)]
    return TrainError([("target", f"{short_text(job.target, 300)}: its tokenizer gave ids outside the target's "
                                  f"vocabulary 0..{vocab - 1} ({count(outside, 'token')} of {what}, ids "
                                  f"{short_list(sorted(set(outside.tolist())), quote=False)}): is the tokenizer in "
                                  "the target folder this model's?")])


def no_windows(job, files: Sequence[Path], docs: Sequence[str], ids: torch.Tensor,
               skipped: Sequence[Path] = (), textless: Sequence[str] = ()) -> TrainError:
    """What the data held, when it gives no window of job.seq tokens."""
    held = (f"{count(files, 'file')}, {count(docs, 'document')}, {count(ids, 'token')} in all"
            f"{skipped_note(skipped, textless)}")
    if not docs:
        return TrainError([("data", f"{short_list(job.data, quote=False)}: the data gave no training windows "
                                    f"({held}: no text)")])
    return TrainError([("seq", f"{job.seq}: the data gave no training windows ({held}; a window is {job.seq} "
                               "tokens)")])


def skipped_note(skipped: Sequence[Path], textless: Sequence[str] = ()) -> str:
    """', 2 files skipped (not UTF-8 text): a.bin, b.txt' and ', 1 record without text skipped
    (...): d.jsonl:3', or '' when nothing was."""
    note = ""
    if skipped:
        note += (f", {count(skipped, 'file')} skipped (not UTF-8 text): "
                 f"{short_list(skipped, 3, 120, quote=False)}")
    refused = [t for t in textless if isinstance(t, R.Refused)]
    textless = [t for t in textless if not isinstance(t, R.Refused)]
    if textless:
        note += (f", {count(textless, 'record')} without text skipped (no text, prompt, completion, messages or "
                 f"conversations field, or an empty one): {short_list(textless, 3, 120, quote=False)}")
    if refused:
        why = short_text(refused[0].why, 200) + (", ..." if len(refused) > 1 else "")
        note += (f", {count(refused, 'chat record')} the chat template refused skipped ({why}): "
                 f"{short_list(refused, 3, 120, quote=False)}")
    return note
