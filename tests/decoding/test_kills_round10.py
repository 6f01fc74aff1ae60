"""Mutation round 10 (scripts/mutate.py): tests that pin behaviour the earlier suites left open in
draftsmith/decoding/drafter.py (the tree expander), draftsmith/convert/rotary.py (``rotated``),
draftsmith/specs/edits.py, draftsmith/options.py and draftsmith/convert/same_draft.py. Each test was seen failing
with the mutant it answers planted by hand."""
import dataclasses
import typing
from types import SimpleNamespace

import pytest
import torch
import yaml
from pydantic import BaseModel

import draftsmith
from draftsmith import default_registry
from draftsmith.convert.rotary import rotated
from draftsmith.decoding.drafter import TreeExpander
from draftsmith.errors import OptionError
from draftsmith.options import check_device, check_threads, parse_dtype, parse_token_ids
from draftsmith.specs.edits import Field, current_value, field_info, spec_data, with_change, yaml_snippet


class _Recorder:
    """A draft forward whose output state is the token it read, so a child's input state names its parent."""

    def __init__(self, vocab: int = 5):
        self.calls, self.vocab = [], vocab

    def __call__(self, tokens, hidden, rows, pos, anc, from_target=False):
        self.calls.append(dict(hidden=hidden[..., 0].clone(), rows=rows.clone(), pos=pos.clone(), anc=anc.clone(),
                               from_target=from_target))
        return tokens.float()[..., None], torch.zeros(*tokens.shape, self.vocab)


# --- decoding/drafter.py -------------------------------------------------------------------------------------------

def test_a_third_expansion_finds_its_parents_among_the_second_calls_children():
    # candidates as draft_candidates numbers them for k = 2: level 1 is 0..1, level 2 is 2..5, level 3 is 6..9 (the
    # children of the second call's frontier: 6, 7 of its node 0, 8, 9 of its node 1)
    k, steps = 2, 4
    run = _Recorder()
    expand = TreeExpander(run, torch.full((1, 1), -1.0), k, steps, torch.tensor([True]))
    expand(torch.tensor([[0, 1]]), torch.tensor([[10, 11]]))
    expand(torch.tensor([[2, 5]]), torch.tensor([[12, 13]]))       # 2 -> node 0 (token 10), 5 -> node 1 (11)
    expand(torch.tensor([[9, 6]]), torch.tensor([[14, 15]]))       # 9 -> node 1 (token 13), 6 -> node 0 (12)
    third = run.calls[2]
    assert run.calls[1]["hidden"].tolist() == [[10, 11]]
    assert third["hidden"].tolist() == [[13, 12]]
    assert third["rows"].tolist() == [[4, 5]] and third["pos"].tolist() == [[2, 2]]
    # 9 descends from 5 (row 3) which descends from 1 (row 1); 6 from 2 (row 2) from 0 (row 0)
    assert third["anc"][0].nonzero().tolist() == [[0, 1], [0, 3], [0, 4], [1, 0], [1, 2], [1, 5]]


def test_tree_expansions_feed_the_draft_its_own_state_not_the_targets():
    # from_target=True would send the draft's own feed through the target hand-over's fusion (fc)
    run = _Recorder()
    expand = TreeExpander(run, torch.zeros(2, 1), 2, 3, torch.tensor([True, True]))
    expand(torch.tensor([[0, 1], [1, 0]]), torch.tensor([[1, 2], [3, 4]]))
    expand(torch.tensor([[2, 3], [4, 5]]), torch.tensor([[1, 2], [3, 4]]))
    assert [c["from_target"] for c in run.calls] == [False, False]


def test_a_chain_expanders_scratch_ancestry_has_one_column_per_scratch_row():
    # k = 1, steps = 2: one expansion, one scratch row; a wider mask widens every draft forward's key span
    run = _Recorder()
    TreeExpander(run, torch.zeros(1, 1), 1, 2, torch.tensor([True]))(torch.tensor([[0]]), torch.tensor([[7]]))
    assert run.calls[0]["anc"].shape == (1, 1, 1) and run.calls[0]["anc"].tolist() == [[[True]]]


# --- convert/rotary.py: rotated() ----------------------------------------------------------------------------------

Q = "layers.0.self_attn.q_proj"


def test_a_per_tensor_scale_on_the_rotated_rows_is_kept_as_it_is():
    # one value for the whole tensor (shape [1] or a scalar) has no rows to reorder
    shapes = {f"{Q}.weight": (8, 4), f"{Q}.weight_scale": (1,), f"{Q}.input_scale": (),
              "layers.0.self_attn.k_proj.weight": (8, 4), "layers.0.self_attn.k_proj.weight_scale": (1, 1)}
    how, problems = rotated(shapes, 4, None)
    assert problems == []
    assert how == {f"{Q}.weight": "rows", f"{Q}.weight_scale": "keep", f"{Q}.input_scale": "keep",
                   "layers.0.self_attn.k_proj.weight": "rows", "layers.0.self_attn.k_proj.weight_scale": "keep"}


def test_rows_head_dim_does_not_divide_are_a_problem():
    how, problems = rotated({f"{Q}.weight": (6, 4), "layers.0.self_attn.q_norm.weight": (6,)}, 4, None)
    assert how == {f"{Q}.weight": "rows", "layers.0.self_attn.q_norm.weight": "rows"}
    assert problems == [f"head_dim 4 does not divide the rows of {Q}.weight [6, 4]",
                        "head_dim 4 does not divide the rows of layers.0.self_attn.q_norm.weight [6]"]


def test_an_unknown_tensor_on_q_proj_is_refused_even_when_its_shape_fits_a_block_scale():
    # [2, 3] is what 4-row blocks of an 8-row weight would give, but only weight_scale_inv is a block scale
    how, problems = rotated({f"{Q}.weight": (8, 4), f"{Q}.lora_B": (2, 3)}, 4, 4)
    assert how == {f"{Q}.weight": "rows"}
    assert problems == [f"{Q}.lora_B [2, 3] sits on the rotated q/k rows, and convert does not know how to reorder it"]


def test_block_scales_are_reordered_only_with_a_block_size_that_gives_their_shape():
    shapes = {f"{Q}.weight": (8, 4), f"{Q}.weight_scale_inv": (2, 1)}
    assert rotated(shapes, 4, 4) == ({f"{Q}.weight": "rows", f"{Q}.weight_scale_inv": "block"}, [])
    for rows_per_block in (None, 8, 3):            # no block size, or one that gives 1 or 3 scale rows, not 2
        how, problems = rotated(shapes, 4, rows_per_block)
        assert how == {f"{Q}.weight": "rows"}
        assert len(problems) == 1 and problems[0].startswith(f"{Q}.weight_scale_inv [2, 1]: FP8 block scales whose")


# --- specs/edits.py ------------------------------------------------------------------------------------------------

E3 = {"name": "r10", "draft": {"fusion": {"kind": "eagle3", "norm_before_residual": False},
                               "attention": {"kind": "gqa", "rope": "interleaved"}}}


def test_a_fields_readings_cannot_be_changed_once_found():
    info = field_info(E3, "draft.attention.rope", default_registry())
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.default = "interleaved"
    assert hash(info) == hash(Field(info.values, info.default, info.declared))


def test_the_current_reading_is_the_stated_value_else_the_fields_default():
    info = Field(("neox", "interleaved"), "neox", "neox")
    assert current_value(E3, "draft.attention.rope", info) == "interleaved"
    assert current_value(E3, "draft.norms.input", info) == "neox"                   # unstated: the default
    assert current_value(E3, "draft.attention.rope", Field(("a",), None)) == "interleaved"


def test_a_path_through_a_plain_value_or_a_reference_without_a_name_has_no_readings():
    registry = default_registry()
    assert field_info(E3, "name.rope", registry) is None                # name is a string, not a section
    assert field_info(E3, "draft.feed_back.rope", registry) is None
    for kind in (None, ["gqa"], {"name": "gqa"}):     # unvalidated data: a reference whose kind is no name
        data = with_change(E3, "draft.attention.kind", kind)
        assert field_info(data, "draft.attention.rope", registry) is None


def test_a_specs_data_holds_what_it_states_not_every_default(tmp_path):
    (tmp_path / "r10.yaml").write_text(yaml.safe_dump(E3))
    assert spec_data(draftsmith.load_spec(tmp_path / "r10.yaml")) == E3


def test_a_yaml_snippet_is_written_in_block_style_and_in_the_order_of_the_changes():
    # in the order the changes were given, not sorted
    changes = [("draft.fusion.fc_norm", True), ("draft.attention.rope", "neox")]
    assert yaml_snippet(changes) == "draft:\n  fusion:\n    fc_norm: true\n  attention:\n    rope: neox"


class _PluginFusion(BaseModel):
    # a plugin's params model may wrap a field's type in Annotated inside an Optional
    gate: typing.Optional[typing.Annotated[bool, "a plugin's note"]] = None
    place: typing.Annotated[typing.Literal["in", "out"], "note"] | int = "in"


def test_readings_are_found_inside_annotated_members_of_a_union():
    registry = SimpleNamespace(components={("fusion", "eagle3"): SimpleNamespace(record=SimpleNamespace(
        params=_PluginFusion))})
    assert field_info(E3, "draft.fusion.gate", registry) == Field((False, True), None, None)
    assert field_info(E3, "draft.fusion.place", registry) == Field(("in", "out"), "in", "in")


# --- options.py ----------------------------------------------------------------------------------------------------

def test_token_ids_of_up_to_eighteen_digits_are_read_and_longer_ones_refused():
    assert parse_token_ids("1," + "9" * 17 + " " + "9" * 18) == [1, 10 ** 17 - 1, 10 ** 18 - 1]
    with pytest.raises(OptionError, match="too large to be a token id"):
        parse_token_ids("1," + "1" * 19)


def test_a_torch_dtype_is_taken_as_itself_only_when_it_is_a_float_kind():
    assert parse_dtype(torch.float32) is torch.float32 and parse_dtype(torch.bfloat16) is torch.bfloat16
    for bad in (torch.int8, torch.float8_e4m3fn):
        with pytest.raises(OptionError, match="is not a weight dtype"):
            parse_dtype(bad)


def test_mps_is_taken_only_where_the_machine_has_it_and_other_kinds_never(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(OptionError, match=r"device 'mps' is not available here; use cpu$"):
        check_device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert check_device("mps") == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(OptionError, match=r"device 'meta' is not available here; use cpu or cuda$"):
        check_device("meta")


def test_a_cuda_device_without_an_index_or_with_one_in_range_is_taken(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert check_device("cuda") == "cuda" and check_device("cuda:0") == "cuda:0"
    with pytest.raises(OptionError, match=r"only 1 CUDA device\(s\) \(cuda:0..cuda:0\)"):
        check_device("cuda:1")


def test_a_refused_cuda_device_says_whether_torch_lacks_cuda_or_the_machine_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(OptionError, match="this torch is built without CUDA; use the cpu device"):
        check_device("cuda")
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    with pytest.raises(OptionError, match="no CUDA GPU is visible; use the cpu device"):
        check_device("cuda:0")


def test_threads_are_bounded_by_one_cpu_where_the_count_is_unknown(monkeypatch):
    monkeypatch.setattr("draftsmith.options.os.cpu_count", lambda: None)
    assert check_threads(1) == 1
    with pytest.raises(OptionError, match=r"allowed an integer in 1\.\.1,"):
        check_threads(2)


@pytest.mark.parametrize("text, says", [("1,,2", "an item is empty; token ids"), ("3,", "an item is empty; token ids"),
                                        ("", ": token ids"), ("1,x", ": token ids"), ("\uff11\uff12", ": token ids")])
def test_token_ids_refused_say_an_empty_item_only_where_there_is_one(text, says):
    with pytest.raises(OptionError, match=says) as e:
        parse_token_ids(text)
    assert ("an item is empty" in str(e.value)) == ("empty" in says)
