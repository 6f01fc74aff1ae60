"""``assemble`` and the notes of ``explain``, at the edges the other tests left open: a v2 spec on a plain target
loads as v2 while a target with recurrent layer_types refuses v2 and falls back under auto (said only when auto asked
for trees); a Spec made in memory (no file) finds its relative checkpoints from the working directory; a tied
target's second head is refused with the shapes said only when they differ; a draft with its t2d loads without the
derived-t2d warning; a registered spec whose own draft folder is missing still notes what a given draft is; a
tokenizer folder's own code is never run and one transformers refuses names tokenizer.json; and every folder, repr,
detector reason or transformers message these errors, notes and warnings quote is whole up to its limit and cut
past it."""

import pytest

import draftsmith
from draftsmith.errors import CheckpointError, DraftsmithError, OptionError, SpecError
from draftsmith.hooks import LayoutMatch, hookimpl
from draftsmith.specs.loader import load_spec
from draftsmith.specs.schema import Spec
from draftsmith.testing import edit_config, write_eagle3, write_target

SMALL = dict(intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=8, vocab_size=32,
             hidden_size=16)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A plain target, its EAGLE-3 draft, and a copy of the target whose config declares a linear-attention layer."""
    root = tmp_path_factory.mktemp("asm12")
    target = write_target(root / "t", **SMALL)
    recurrent = edit_config(target, root / "r", layer_types=["full_attention"] * 7 + ["linear_attention"])
    return target, write_eagle3(root / "d", target), recurrent


@pytest.fixture(scope="module")
def spec():
    return load_spec("eagle3-llama")


# --- assemble.py:205 mode v2 against a recurrent target ------------------------------------------------------------

def test_a_v2_spec_on_a_plain_target_loads_as_v2(folders, spec):
    target, draft, _ = folders
    model = draftsmith.assemble(spec.with_decoding(mode="v2"), target=target, draft=draft)
    assert model.recurrent is False and model.plan().mode == "v2"


def test_a_v2_spec_on_a_recurrent_target_is_refused_naming_decoding_mode(folders, spec):
    _, draft, recurrent = folders
    with pytest.raises(SpecError) as err:
        draftsmith.assemble(spec.with_decoding(mode="v2"), target=recurrent, draft=draft)
    msg = str(err.value)
    assert "decoding.mode: v2 (tree drafting with compaction) is unsupported with this target: the target has " \
           "recurrent (mamba / linear-attention) layers" in msg, msg
    assert "Use mode: auto to fall back to v1 with a logged reason." in msg and "allowed: auto, v1" in msg, msg


def test_an_auto_spec_on_a_recurrent_target_loads_and_falls_back_to_a_chain(folders, spec, caplog):
    _, draft, recurrent = folders
    with caplog.at_level("WARNING", logger="draftsmith"):
        model = draftsmith.assemble(spec, target=recurrent, draft=draft)
    assert model.recurrent is True and model.plan().mode == "v1"
    assert "asks for trees (topk 4), and auto chose v1 (chain): the target has recurrent" in caplog.text


# --- assemble.py:57 a Spec without a source file ------------------------------------------------------------------

def test_a_spec_made_in_memory_reads_relative_checkpoints_from_the_working_directory(folders, spec, monkeypatch):
    target, draft, _ = folders
    data = spec.model_dump(mode="json")
    data["checkpoints"] = {"target": target.name, "draft": draft.name}
    made = Spec.model_validate(data)
    assert made._source is None
    monkeypatch.chdir(target.parent)
    model = draftsmith.assemble(made)
    assert {k: str(v) for k, v in model.folders.items()} == {"target": "t", "draft": "d"}


# --- assemble.py:136 a tied target's own lm_head ------------------------------------------------------------------

def tied_with_head(root, head_of):
    """A tied target whose file also holds lm_head.weight = head_of(the embedding), and a draft for it."""
    from safetensors.torch import load_file

    from draftsmith.assembler.checkpoint import save_safetensors

    target = write_target(root / "tied", **SMALL, tie_word_embeddings=True)
    tensors = load_file(target / "model.safetensors")
    tensors["lm_head.weight"] = head_of(tensors["model.embed_tokens.weight"])
    save_safetensors(tensors, target)
    return target, write_eagle3(root / "d", target)


def refused(root, head_of) -> str:
    target, draft = tied_with_head(root, head_of)
    with pytest.raises(CheckpointError) as err:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    return str(err.value)


def test_a_tied_head_of_the_embeddings_shape_is_refused_without_shapes(tmp_path):
    msg = refused(tmp_path, lambda e: e * 0.5)
    assert "holds lm_head.weight and model.embed_tokens.weight with different values, but the target's config" in msg
    assert "shapes" not in msg, msg


def test_a_tied_head_of_another_shape_is_refused_saying_both_shapes(tmp_path):
    msg = refused(tmp_path, lambda e: e[:-1].clone())
    assert ("holds lm_head.weight and model.embed_tokens.weight with different values (shapes [31, 16] and [32, 16]), "
            "but the target's config has tie_word_embeddings true") in msg, msg


# --- assemble.py:289 the auto fallback said at a load --------------------------------------------------------------

@pytest.mark.parametrize("changes, said", [({"topk": 2}, "asks for trees (topk 2), and auto chose v1 (chain)"),
                                           ({"topk": 1}, None), ({"mode": "v1"}, None)])
def test_the_fallback_from_trees_is_said_only_for_auto_asking_for_trees(folders, spec, caplog, changes, said):
    """topk 2 is a tree; topk 1 is a chain already, and mode v1 asked for one: nothing to say."""
    _, draft, recurrent = folders
    with caplog.at_level("WARNING", logger="draftsmith"):
        model = draftsmith.assemble(spec.with_decoding(**changes), target=recurrent, draft=draft)
    assert model.plan().mode == "v1"
    if said is None:
        assert "asks for trees" not in caplog.text, caplog.text
    else:
        assert said in caplog.text, caplog.text


# --- assemble.py:154 a reduced vocabulary with its t2d -------------------------------------------------------------

def test_a_draft_holding_t2d_loads_without_the_derived_t2d_warning(folders, tmp_path, caplog):
    target, _, _ = folders
    draft = write_eagle3(tmp_path / "reduced", target, draft_vocab=16)
    with caplog.at_level("WARNING", logger="draftsmith"):
        model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert model.draft.d2t.shape == (16,)
    assert "holds no t2d" not in caplog.text, caplog.text


# --- assemble.py:95 a registered spec whose own draft folder is missing --------------------------------------------

def test_a_registered_spec_whose_own_draft_is_missing_still_says_what_a_given_draft_is(folders, tmp_path):
    """spec_own cannot compare the given folder with a spec folder that is not there: the given draft is not the
    spec's own, so the note that it is detected as another spec is said."""
    from draftsmith.registry.registry import build_registry
    target, draft, _ = folders
    builtin = load_spec("eagle3-llama").source
    text = open(builtin).read().replace("name: eagle3-llama", "name: mine").replace("num_layers: auto", "num_layers: 2")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine.yaml").write_text(text + "checkpoints: {draft: no-such-draft}\n")
    registry = build_registry(spec_path=str(tmp_path / "specs"))
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble("mine", target=target, draft=draft, registry=registry)
    notes = getattr(err.value, "__notes__", [])
    assert any(n.startswith(f"note: {draft} is detected as eagle3-llama (") for n in notes), notes


# --- assemble.py:157 the derived-t2d warning names the draft folder, cut past 300 characters ------------------------

@pytest.mark.parametrize("length", [300, 320])
def test_the_derived_t2d_warning_names_the_folder_whole_up_to_300_characters(folders, tmp_path, caplog, length):
    from safetensors.torch import load_file

    from draftsmith.assembler.checkpoint import save_safetensors

    target, _, _ = folders
    deep = tmp_path / ("a" * 200)
    folder = deep / ("b" * (length - len(str(deep)) - 1))
    assert len(str(folder)) == length
    draft = write_eagle3(folder, target, draft_vocab=16)
    tensors = load_file(draft / "model.safetensors")
    del tensors["t2d"]
    (draft / "model.safetensors").unlink()
    save_safetensors(tensors, draft)
    with caplog.at_level("WARNING", logger="draftsmith"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    shown = str(draft) if length <= 300 else f"{str(draft)[:148]}...{str(draft)[-148:]}"
    assert f"draftsmith: {shown} holds no t2d (or the spec ignores it): derived from d2t read as offsets" \
           in caplog.text, caplog.text


# --- assemble.py:313 a tokenizer folder's own code is never run ---------------------------------------------------

def test_a_tokenizer_that_maps_to_its_own_code_loads_as_the_plain_fast_tokenizer(tmp_path):
    """tokenizer_config.json's auto_map names a class in the folder's tok.py: transformers would import it only with
    trust_remote_code, which assemble never passes; the tokenizer.json is read as is."""
    target = write_target(tmp_path / "t", tokenizer=True, **{**SMALL, "vocab_size": 258})
    edit_config(target, name="tokenizer_config.json", auto_map={"AutoTokenizer": [None, "tok.FolderTokenizer"]})
    (target / "tok.py").write_text("from transformers import PreTrainedTokenizerFast\n\n\n"
                                   "class FolderTokenizer(PreTrainedTokenizerFast):\n    pass\n")
    model = draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target))
    assert type(model.tokenizer).__name__ != "FolderTokenizer"
    assert not type(model.tokenizer).__module__.startswith("transformers_modules")
    assert model.tokenizer.decode(model.tokenizer.encode("hi")) == "hi"


# --- assemble.py:85 a missing folder's name, cut past 300 characters ---------------------------------------------

@pytest.mark.parametrize("length", [300, 320])
def test_a_missing_target_folder_is_named_whole_up_to_300_characters(folders, tmp_path, length):
    _, draft, _ = folders
    deep = tmp_path / ("a" * 200)
    missing = str(deep / ("b" * (length - len(str(deep)) - 1)))
    assert len(missing) == length
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble("eagle3-llama", target=missing, draft=draft)
    shown = missing if length <= 300 else f"{missing[:148]}...{missing[-148:]}"
    assert str(err.value).startswith(f"target checkpoint folder {shown!r} "), str(err.value)


# --- assemble.py:248 a warn_fallback that is no bool, its repr cut past 100 characters ------------------------------

@pytest.mark.parametrize("chars", [98, 200])
def test_a_warn_fallback_that_is_no_bool_is_refused_quoting_it_up_to_100_characters(chars):
    given = "y" * chars
    with pytest.raises(OptionError) as err:
        draftsmith.assemble("eagle3-llama", warn_fallback=given)
    quoted = repr(given) if chars == 98 else f"{repr(given)[:48]}...{repr(given)[-48:]}"
    assert str(err.value) == f"warn_fallback: True or False, got the str {quoted}", str(err.value)


# --- assemble.py:315 a tokenizer transformers cannot read ----------------------------------------------------------

def test_a_broken_tokenizer_json_is_refused_naming_that_file(tmp_path):
    target = write_target(tmp_path / "t", tokenizer=True, **{**SMALL, "vocab_size": 258})
    (target / "tokenizer.json").write_text("{")
    with pytest.raises(CheckpointError) as err:
        draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target))
    msg = str(err.value)
    assert msg.startswith(f"{target / 'tokenizer.json'}: transformers cannot read the tokenizer: "), msg


# --- explain.py:141 the detected-as note names the draft folder, cut past 300 characters ---------------------------

@pytest.mark.parametrize("length", [300, 320])
def test_the_detected_as_note_names_the_draft_folder_whole_up_to_300_characters(folders, tmp_path, length):
    """An EAGLE-3 draft given to eagle1-llama: the note says what it is detected as, naming the folder three times."""
    target, _, _ = folders
    deep = tmp_path / ("a" * 200)
    folder = deep / ("b" * (length - len(str(deep)) - 1))
    assert len(str(folder)) == length
    draft = write_eagle3(folder, target)
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble("eagle1-llama", target=target, draft=draft)
    where = str(draft) if length <= 300 else f"{str(draft)[:148]}...{str(draft)[-148:]}"
    assert getattr(err.value, "__notes__", []) == [
        f"note: {where} is detected as eagle3-llama (midlayer.* tensors with hidden_norm and fc (EAGLE-3, "
        f"yuhuili/lmsys)): `draftsmith inspect {where}` writes that spec, and `draftsmith generate --draft {where}` "
        "without --spec uses it"]


# --- explain.py:115 DetectedNote's shipped defaults to False -----------------------------------------------------

def test_detected_note_by_default_reads_the_draft_as_the_users_own(folders):
    """Called without ``shipped``, the draft is not taken for the spec's shipped one: the note is said."""
    from draftsmith.assembler.checkpoint import list_tensors
    from draftsmith.assembler.explain import DetectedNote
    from draftsmith.registry import default_registry

    _, draft, _ = folders
    note = DetectedNote(default_registry(), load_spec("eagle1-llama"), draft, list(list_tensors(draft)))
    assert note().startswith(f"note: {draft} is detected as eagle3-llama (midlayer.* tensors with hidden_norm"), note()
    assert DetectedNote(default_registry(), load_spec("eagle1-llama"), draft, list(list_tensors(draft)),
                         shipped=True)() is None


# --- explain.py:142 a detector's reason, cut past 300 characters -------------------------------------------------

class ReasonDetector:
    """A plugin whose detector takes every draft for eagle3-llama, for the reason it is given."""

    def __init__(self, reason):
        self.reason = reason

    @hookimpl
    def draftsmith_detect_layout(self, config, tensor_names):
        return LayoutMatch("eagle3-llama", self.reason)


@pytest.mark.parametrize("chars", [300, 320])
def test_the_detected_as_note_quotes_a_detectors_reason_whole_up_to_300_characters(folders, chars):
    target, draft, _ = folders
    reason = "r" * chars
    registry = draftsmith.build_registry(plugins=[("reasons", ReasonDetector(reason))], entry_points=False)
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble("eagle1-llama", target=target, draft=draft, registry=registry)
    shown = reason if chars <= 300 else f"{reason[:148]}...{reason[-148:]}"
    assert f"note: {draft} is detected as eagle3-llama ({shown}): `draftsmith inspect" in \
        "\n".join(getattr(err.value, "__notes__", [])), getattr(err.value, "__notes__", [])


@pytest.mark.parametrize("chars", [300, 320])
def test_what_transformers_says_of_a_tokenizer_is_quoted_whole_up_to_300_characters(tmp_path, monkeypatch, chars):
    from transformers import AutoTokenizer

    def refuse(*args, **kwargs):
        raise ValueError("t" * chars)

    target = write_target(tmp_path / "t", tokenizer=True, **{**SMALL, "vocab_size": 258})
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", refuse)
    with pytest.raises(CheckpointError) as err:
        draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(tmp_path / "d", target))
    said = "t" * chars if chars <= 300 else f"{'t' * 148}...{'t' * 148}"
    assert str(err.value) == f"{target / 'tokenizer.json'}: transformers cannot read the tokenizer: {said}"
