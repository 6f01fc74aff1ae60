"""The TTT loss counts the positions whose target next token is in the draft's vocabulary. A run where none is
(a --from-draft whose vocabulary misses every label) logged loss 0.000 at every step and trained nothing; it is
now refused before the first step, and every run says what share it counts."""
import re

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from draftsmith.assembler.vocab import make_vocab_map
from draftsmith.testing import BYTE_VOCAB, write_eagle3
from draftsmith.train.checks import TrainError
from draftsmith.train.pipeline import run


def tops(features):
    found = set()
    for shard in sorted(features.glob("*.safetensors")):
        with safe_open(str(shard), "pt") as f:
            found |= set(f.get_tensor("top")[:, 1:].flatten().tolist())
    return found


def test_a_draft_vocabulary_missing_every_label_is_refused_before_training(job, tiny, tmp_path):
    first, lines = tmp_path / "first", []
    run(job(first, config={"steps": 2}), log=lines.append)
    said = [line for line in lines if line.startswith("labels: ")]
    assert len(said) == 1 and re.fullmatch(r"labels: \d+ of \d+ positions \(\d+\.\d%\) have the target's next token "
                                           r"in the draft vocabulary; the loss counts those", said[0])
    features, seen = first / "features", tops(first / "features")
    missing = torch.tensor(sorted(set(range(BYTE_VOCAB)) - seen)[:8])
    assert len(missing) == 8   # the tiny target's greedy tokens leave most of its 258 ids unused
    source = write_eagle3(tmp_path / "source", tiny / "target", draft_vocab=8)
    (file,) = source.glob("*.safetensors")
    tensors = load_file(file)
    tensors["d2t"], tensors["t2d"] = make_vocab_map(missing, BYTE_VOCAB)
    save_file(tensors, file, metadata={"format": "pt"})
    out = tmp_path / "out"
    with pytest.raises(TrainError, match=r"none of the \d+ target next tokens in the features in .* is in the "
                                         r"draft's vocabulary of 8 ids, so the loss would count no position; .* "
                                         r"holds that draft untrained: give a new --out"):
        run(job(out, from_draft=source, features=features, max_windows=0, config={"steps": 2}))
    assert torch.load(out / "trainer.pt", weights_only=True)["step"] == 0   # refused before the first step


def test_the_share_counted_is_what_the_features_hold(job, tmp_path):
    from draftsmith.train.features import FeatureStore

    out = tmp_path / "d"
    run(job(out, config={"steps": 2}))
    store = FeatureStore(out / "features")
    every = torch.arange(BYTE_VOCAB)
    counted, total = store.labels_in(every)
    assert counted == total > 0
    seen = torch.tensor(sorted(tops(out / "features")))
    assert store.labels_in(seen[:1])[0] > 0 and store.labels_in(seen[:1])[0] < total
    assert store.labels_in(torch.tensor(sorted(set(range(BYTE_VOCAB)) - set(seen.tolist()))))[0] == 0
