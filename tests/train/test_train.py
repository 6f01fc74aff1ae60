"""draftsmith train on a tiny target: the loss falls, a resumed run matches an uninterrupted one bit for bit, the
output loads through assemble (the spec's layout) and decodes exactly like target-only, the vocabulary map keeps
invariant 24, and the CLI runs end to end."""
import json
import re

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

import draftsmith
from draftsmith.assembler.vocab import check_vocab_map
from draftsmith.cli import app
from draftsmith.train import data as D
from draftsmith.train.features import FeatureStore, extract
from draftsmith.train.loop import STATE
from draftsmith.train.pipeline import reduced_vocab, run
from draftsmith.train.ttt import ttt_losses


def test_a_few_steps_lower_the_loss(tiny, tmp_path):
    from draftsmith.train.draft_io import init_draft

    ids = D.encode(D.read_documents(D.expand([tiny / "data"])), _tok(tiny), 257)
    model = init_draft("eagle3-llama", tiny / "target", tmp_path / "d", reduced_vocab(ids, 258, 96))
    extract(model, D.windows(ids, 48), tmp_path / "f", limit=8)
    fixed = next(FeatureStore(tmp_path / "f").batches(8, seed=1))
    before, _ = ttt_losses(model, fixed, 3)
    from draftsmith.train.loop import TrainConfig, train

    train(model, FeatureStore(tmp_path / "f"), tmp_path / "d", TrainConfig(steps=25, batch=4, lr=3e-3, save_every=25))
    with torch.no_grad():
        after, _ = ttt_losses(model, fixed, 3)
    assert after.item() < 0.8 * before.item()


def test_resume_continues_identically(job, tiny, tmp_path):
    run(job(tmp_path / "straight"))
    run(job(tmp_path / "resumed", config={"steps": 12, "minutes": 1e-9}))   # stops after its first step
    assert torch.load(tmp_path / "resumed" / STATE, weights_only=True)["step"] < 12
    run(job(tmp_path / "resumed"))
    a = torch.load(tmp_path / "straight" / STATE, weights_only=True)
    b = torch.load(tmp_path / "resumed" / STATE, weights_only=True)
    assert a["step"] == b["step"] == 12
    for name, t in a["draft"].items():
        assert torch.equal(t, b["draft"][name]), name


def test_a_run_already_at_its_steps_says_so_and_only_evaluates(job, tmp_path):
    run(job(tmp_path / "d"))
    lines = []
    run(job(tmp_path / "d"), log=lines.append)                # the same command again
    assert any("already at step 12 of --steps 12: nothing to train" in line for line in lines), lines
    assert not any("loss nan" in line for line in lines)


def test_output_loads_in_the_spec_layout_and_decodes_like_target_only(job, tiny, tmp_path):
    out = tmp_path / "draft"
    run(job(out))
    names = set(load_file(str(out / "model.safetensors")))
    assert any(n.startswith("midlayer.") for n in names) and not any(n.startswith("layers.") for n in names)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["draft_vocab_size"] == 96 and "eagle_config" not in cfg   # default taps: unsaid
    model = draftsmith.assemble("eagle3-llama", target=tiny / "target", draft=out)
    for prompt in ["def f(x):", "import os\n", "class A:"]:
        base = model.generate_baseline(prompt, max_new_tokens=24)
        for plan in ({}, {"topk": 1, "steps": 4}, {"topk": 4, "steps": 6, "draft_tokens": 17}):
            assert model.generate(prompt, max_new_tokens=24, **plan).token_ids == base.token_ids


def test_vocab_map_keeps_invariant_24(job, tiny, tmp_path):
    out = tmp_path / "draft"
    run(job(out, config={"steps": 2}))
    assert (out / "features").stat().st_mode & 0o700 == 0o700, "export took the feature cache's x bit"
    assert (out / "model.safetensors").stat().st_mode & 0o777 == 0o644
    t = load_file(str(out / "model.safetensors"))
    d2t, t2d = t["d2t"], t["t2d"]
    check_vocab_map(d2t, t2d)
    kept = torch.arange(len(d2t)) + d2t                      # d2t holds offsets, not absolute ids
    assert int(t2d.sum()) == len(d2t) == 96
    assert bool((kept[1:] > kept[:-1]).all()) and bool(t2d[kept].all())
    t2d_index = torch.cumsum(t2d.long(), 0) - 1              # target -> draft on kept tokens
    assert torch.equal(kept[t2d_index[kept]], kept)
    ids = D.encode(D.read_documents(D.expand([tiny / "data"])), _tok(tiny), 257)
    counts = torch.bincount(ids, minlength=258)
    assert counts[kept].min() >= counts[~t2d].max()           # the most frequent tokens were kept


def test_eagle1_trains_too(job, tiny, tmp_path):
    """EAGLE-1 reads the target's head: its whole vocabulary, whatever --draft-vocab asks (the log once claimed a
    reduced one)."""
    out, lines = tmp_path / "e1", []
    run(job(out, spec="eagle1-llama", draft_vocab=96, config={"steps": 3}), log=lines.append)
    assert any("--draft-vocab does not apply" in line for line in lines), lines
    assert not any("most frequent" in line for line in lines)
    model = draftsmith.assemble("eagle1-llama", target=tiny / "target", draft=out)
    base = model.generate_baseline("def f(x):", max_new_tokens=16)
    assert model.generate("def f(x):", max_new_tokens=16).token_ids == base.token_ids


def test_self_distilled_hard_labels_frozen_head(job, tiny, tmp_path, capsys):
    out = tmp_path / "sd"
    run(job(out, self_distill=4, config={"steps": 4, "labels": "hard", "freeze_head": True}))
    assert re.search(r"self-distillation: (\d+)/\1 documents", capsys.readouterr().out)
    state = torch.load(out / STATE, weights_only=True)["draft"]
    kept = torch.arange(len(state["d2t"])) + state["d2t"]
    head = load_file(str(tiny / "target" / "model.safetensors"))["lm_head.weight"]
    assert torch.equal(state["lm_head.weight"], head[kept])          # frozen at the target's rows


def test_cli_smoke(tiny, tmp_path):
    out = tmp_path / "cli"
    res = CliRunner().invoke(app, ["train", "--out", str(out), "--target", str(tiny / "target"), "--data",
                                   str(tiny / "data"), "--eval", str(tiny / "data" / "heapq.py"), "--steps", "3",
                                   "--batch", "2", "--seq", "48", "--draft-vocab", "96", "--max-windows", "8",
                                   "--eval-prompts", "1"])
    assert res.exit_code == 0, res.output
    assert "tree topk 4, 6 levels, 17 nodes: tau" in res.output
    assert (out / "model.safetensors").is_file() and (out / STATE).is_file()
    again = CliRunner().invoke(app, ["train", "--out", str(out), "--target", str(tiny / "target"), "--data",
                                     str(tiny / "data"), "--eval", str(tiny / "data" / "heapq.py"), "--eval-only",
                                     "--seq", "48", "--eval-prompts", "1"])
    assert again.exit_code == 0 and "chain 5: tau" in again.output, again.output
    missing = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "x"), "--target", str(tiny / "target")])
    assert missing.exit_code == 2 and "no training data" in missing.output


def _tok(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny / "target"))


def test_self_distillation_in_batches_equals_one_document_at_a_time(tiny, tmp_path):
    """Batched continuations (prompts of different lengths side by side) are the target's greedy ones, document by
    document (float32)."""
    from draftsmith.testing import write_eagle3
    from draftsmith.train.pipeline import self_distilled

    tok = _tok(tiny)
    draft = write_eagle3(tmp_path / "d", tiny / "target")
    model = draftsmith.assemble("eagle3-llama", target=tiny / "target", draft=draft)
    docs = [p.read_text() for p in sorted((tiny / "data").glob("*.py"))][:5] + ["x", ""]
    batched = self_distilled(model, docs, tok, 12, 6, log=lambda _: None, batch=4)
    single = self_distilled(model, docs, tok, 12, 6, log=lambda _: None, batch=1)
    assert batched == single and len(batched) == len(docs) - 1     # the empty document has nothing to continue


def test_self_distillation_prompts_per_document_start_at_line_boundaries(tiny, tmp_path):
    """per_doc=3: three continuations per document, from its start and from the lines a third and two thirds of
    the way in; each begins with its own prompt."""
    from draftsmith.testing import write_eagle3
    from draftsmith.train.data import line_offsets
    from draftsmith.train.pipeline import self_distilled

    assert line_offsets("a\nb\nc\nd\ne\nf\n", 3) == ["a\nb\nc\nd\ne\nf\n", "c\nd\ne\nf\n", "e\nf\n"]
    assert line_offsets("one line", 3) == ["one line"]                       # no duplicate starts
    tok = _tok(tiny)
    draft = write_eagle3(tmp_path / "d", tiny / "target")
    model = draftsmith.assemble("eagle3-llama", target=tiny / "target", draft=draft)
    doc = "".join(f"x{i} = {i}\n" for i in range(30))
    out = self_distilled(model, [doc], tok, 12, 6, log=lambda _: None, per_doc=3)
    assert len(out) == 3
    for text, start in zip(out, (0, 10, 20)):
        prompt = tok.decode(tok(f"x{start} = {start}\n" + doc.split(f"x{start} = {start}\n", 1)[1],
                                add_special_tokens=False)["input_ids"][:12])
        assert text.startswith(prompt)


@pytest.mark.parametrize(("config", "from_target"),
                         [({}, True), ({"init": "target"}, True), ({"init": "random"}, False)])
def test_a_fresh_run_starts_from_the_target_unless_asked_for_random(job, tmp_path, monkeypatch, capsys, config,
                                                                    from_target):
    from draftsmith.train import pipeline

    seen = []

    class Started(Exception):
        pass

    def fake_start(model):
        seen.append(model)
        return ["fc.weight"], []

    def fake_train(*args, **kw):
        raise Started   # stop before any training: only the start is under test

    monkeypatch.setattr(pipeline, "start_from_target", fake_start)
    monkeypatch.setattr(pipeline, "train", fake_train)
    with pytest.raises(Started):
        run(job(tmp_path / "d", config=config))
    assert len(seen) == from_target
    assert ("start: 1 draft weights from the target's last layer" in capsys.readouterr().out) == from_target
