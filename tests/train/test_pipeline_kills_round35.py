"""Mutation survivors (round 35) of draftsmith.train.pipeline.end_notes: a finished run's notes include
canonical_kept's (tensors written under their canonical names for want of an inverse rename), not only the ones that
read the draft's config.json."""
from types import SimpleNamespace

from test_train_review import written

from draftsmith.train import pipeline
from draftsmith.train.export_notes import canonical_kept


# catches pipeline.py end_notes without canonical_kept(model, out) among its notes
def test_the_end_notes_say_tensors_kept_under_canonical_names(tmp_path):
    model, folder = written(tmp_path, ["{match: '^fuse\\.', replace: 'fc.'}",
                                       "{match: '^blocks\\.(\\d+)\\.ffn\\.', replace: 'layers.\\1.mlp.'}"],
                            ["fuse.weight", "layers.0.mlp.up_proj.weight", "norm.weight"])
    (folder / "config.json").write_text("{}")
    model.draft = SimpleNamespace(fc=SimpleNamespace(norm_output="head"), taps=())
    kept = canonical_kept(model, folder)
    assert kept and "canonical names ('layers.0.mlp.up_proj.weight')" in kept
    assert pipeline.end_notes(model, folder, "mine") == [kept]
