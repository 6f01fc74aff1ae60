"""Kills for assembler/build.py survivors (round 23b): held_d2t_rows' bounds (a d2t of one row is a one-token
vocabulary; an empty one, or one of another rank, or two, are no size), and build_draft's ``defer`` default (False:
inspect's stand-in builds refuse a draft whose spec's decoding.topk is past its reduced vocabulary, as the load
does)."""
import copy

from draftsmith.assembler.build import held_d2t_rows
from draftsmith.assembler.checkpoint import TensorInfo
from draftsmith.components.weights import RegexRule, RuleSet
from draftsmith.convert.fits import fit
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.testing import write_eagle3, write_target


def infos(**shapes):
    return {name: TensorInfo(name, shape, "I64", None) for name, shape in shapes.items()}


def test_held_d2t_rows_takes_a_one_row_d2t_and_no_empty_one():
    """One row is a (one-token) vocabulary's size; zero rows, two dimensions or no d2t say no size."""
    assert held_d2t_rows(RuleSet(), infos(d2t=(1,))) == 1
    assert held_d2t_rows(RuleSet(), infos(d2t=(7,), t2d=(96,))) == 7
    assert held_d2t_rows(RuleSet(), infos(d2t=(0,))) is None
    assert held_d2t_rows(RuleSet(), infos(d2t=(1, 7))) is None
    assert held_d2t_rows(RuleSet(), infos(t2d=(96,))) is None


def test_held_d2t_rows_reads_the_d2t_through_the_rules():
    """A checkpoint's 'model.d2t' renamed to d2t by the spec's rule is the d2t; two names both made d2t are none."""
    rules = RuleSet([RegexRule(match=r"^model\.", replace="")])
    assert held_d2t_rows(rules, infos(**{"model.d2t": (5,)})) == 5
    assert held_d2t_rows(rules, infos(**{"model.d2t": (5,), "d2t": (5,)})) is None


def test_fit_refuses_a_topk_past_the_reduced_vocabulary_as_the_load_does(tmp_path):
    """build_draft raises the set-aside decoding.topk problem unless asked to defer it: inspect's fit (which builds
    with the default) says the proposed spec does not load a 10-token draft at topk 16, and takes topk 10."""
    draft = write_eagle3(tmp_path / "d", write_target(tmp_path / "t"), draft_vocab=10)
    spec = inspect_checkpoint(draft).spec
    past = copy.deepcopy(spec)
    past.setdefault("decoding", {}).update(topk=16, draft_tokens=40)
    (line,) = fit(draft, past).refused
    assert line.endswith("decoding.topk: 16 candidates per node, but the draft's vocabulary has 10 tokens"), line
    within = copy.deepcopy(spec)
    within.setdefault("decoding", {}).update(topk=10, draft_tokens=40)
    assert fit(draft, within).refused == []
