"""Target-loading problems a review found: a ``text_config`` object in a Llama config.json (ignored, as
transformers' Llama ignores it), a tied target whose files hold a different lm_head.weight (refused, naming what
each transformers version does), and a longrope target asked past original_max_position_embeddings (refused
before any forward: transformers switches to the long factors there, draftsmith keeps the short ones)."""
import re
import shutil

import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import edit_config, write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=4,
             vocab_size=32)


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000"})


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("review")
    target = write_target(root / "target", **SMALL)
    return target, write_eagle3(root / "draft", target, aux_ids=[0, 1, 2])


# --- 3. text_config in a Llama config.json ----------------------------------------------------------------------------

def test_a_text_config_object_in_a_llama_config_is_ignored_as_transformers_ignores_it(pair, tmp_path):
    """transformers keeps the key as a plain dict on a LlamaConfig (get_text_config returns it); it was read as the
    text model's config (AttributeError: 'dict' object has no attribute 'hidden_size', exit 70). The output is the
    plain folder's."""
    target, draft = pair
    nested = edit_config(target, tmp_path / "nested", text_config={"hidden_size": 999})
    outs = []
    for folder in (target, nested):
        res = run("generate", "--target", folder, "--draft", draft, "--token-ids", "5,6,7", "--max-new-tokens", "6",
                  "--no-compare")
        assert res.exit_code == 0, res.output
        outs.append(re.search(r"^output .*$", res.stdout, re.M).group(0))
    assert outs[0] == outs[1]


# --- 2. a tied target whose files hold an lm_head.weight -------------------------------------------------------

def tied_with_head(root, head_of):
    """A tied target (tie_word_embeddings: true, no lm_head.weight saved), and a copy whose file also holds
    lm_head.weight = head_of(the embedding)."""
    from safetensors.torch import load_file

    from draftsmith.assembler.checkpoint import save_safetensors

    plain = write_target(root / "plain", **SMALL, tie_word_embeddings=True)
    shutil.copytree(plain, root / "head")
    tensors = load_file(plain / "model.safetensors")
    assert "lm_head.weight" not in tensors
    tensors["lm_head.weight"] = head_of(tensors["model.embed_tokens.weight"])
    save_safetensors(tensors, root / "head")
    return plain, root / "head"


def load(folder):
    import torch

    from draftsmith.assembler.assemble import load_target
    from draftsmith.components import backends
    from draftsmith.registry import default_registry

    return load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]


def test_a_tied_target_whose_file_holds_another_lm_head_is_refused_naming_both_readings(tmp_path):
    """transformers 5 keeps such a head ('both are present with different values, so we will NOT tie them'),
    transformers 4 ties it: the ignore rule dropped it silently and draftsmith decoded with the embedding."""
    import torch
    from transformers import AutoModelForCausalLM

    from draftsmith.errors import CheckpointError

    _, folder = tied_with_head(tmp_path, lambda e: e * 0.5)
    with pytest.raises(CheckpointError) as err:
        load(folder)
    msg = str(err.value)
    assert msg.startswith(str(folder / "model.safetensors")), msg
    for part in ("lm_head.weight and model.embed_tokens.weight with different values", "tie_word_embeddings true",
                 "transformers 5 keeps lm_head.weight", "transformers 4 ties", "set tie_word_embeddings false",
                 "remove lm_head.weight from the file"):
        assert part in msg, msg
    hf = AutoModelForCausalLM.from_pretrained(folder)    # the transformers installed here (5) keeps the head
    assert not torch.equal(hf.lm_head.weight, hf.model.embed_tokens.weight)


def test_a_tied_target_that_also_saved_its_head_loads_reading_only_that_tensor_more(tmp_path, monkeypatch):
    """The head equal to the embedding (a tied checkpoint that saved both): loads as the folder without it, tied;
    the extra read is lm_head.weight and the embedding, before the load (a check validate makes too), and a
    folder without it reads nothing extra."""
    import torch

    from draftsmith.assembler import assemble as assemble_module

    plain, folder = tied_with_head(tmp_path, lambda e: e.clone())
    read = []
    real = assemble_module.read_tensors
    monkeypatch.setattr(assemble_module, "read_tensors", lambda infos, names, **kw: (
        read.append(list(names)) or real(infos, names, **kw)))
    models = [load(plain), load(folder)]
    assert read == [["lm_head.weight", "model.embed_tokens.weight"]]   # before the load, as stored
    ids = torch.tensor([[1, 5, 9, 30]])
    pos = torch.arange(4)[None]
    logits = [m.logits(m(ids, pos)[0]) for m in models]
    assert torch.equal(logits[0], logits[1])
    assert models[1].lm_head.weight is models[1].model.embed_tokens.weight


def test_a_tied_target_ignores_only_the_head_its_type_names(tmp_path):
    """lm_head.weight (and a text prefix the type renames to lm_head.) is the tied head's; a head under another
    prefix is no tensor of the target's: unexpected, not dropped, and not taken for the head that is compared."""
    from safetensors.torch import load_file

    from draftsmith.assembler.checkpoint import save_safetensors
    from draftsmith.assembler.plan import CheckpointMismatch

    _, folder = tied_with_head(tmp_path, lambda e: e.clone())
    tensors = load_file(folder / "model.safetensors")
    tensors["a.lm_head.weight"] = tensors["lm_head.weight"] * 0.5
    save_safetensors(tensors, folder)
    with pytest.raises(CheckpointMismatch, match="unexpected: 'a.lm_head.weight'"):
        load(folder)


# --- 1. longrope past original_max_position_embeddings --------------------------------------------------------------

ORIGINAL = 32   # the longrope target's original_max_position_embeddings (its context stays 512)


@pytest.fixture(scope="module")
def longrope(pair, tmp_path_factory):
    """The pair's target with longrope scaling (transformers-4 style rope_scaling, as Phi-3 writes it), assembled
    with the pair's draft, and transformers' own model of that folder."""
    import draftsmith
    from transformers import AutoModelForCausalLM

    target, draft = pair
    half = SMALL["hidden_size"] // SMALL["num_attention_heads"] // 2

    scaling = {"rope_type": "longrope", "short_factor": [1.0] * half, "long_factor": [4.0] * half,
               "original_max_position_embeddings": ORIGINAL}
    folder = edit_config(target, tmp_path_factory.mktemp("longrope") / "target", drop=["rope_parameters"],
                         rope_theta=10000.0, rope_scaling=scaling)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=draft, device="cpu", dtype="float32")
    return model, AutoModelForCausalLM.from_pretrained(folder).eval()


def prompt(n):
    return [(i * 7) % SMALL["vocab_size"] for i in range(n)]


def test_a_longrope_call_that_fits_original_max_position_embeddings_decodes_as_transformers(longrope):
    import torch

    model, hf = longrope
    ids = prompt(ORIGINAL - 6)        # prompt + max_new_tokens = original_max_position_embeddings + 1: the last
    want = hf.generate(torch.tensor([ids]), max_new_tokens=7, do_sample=False)[0, len(ids):].tolist()   # never fed
    assert model.generate_baseline(ids, max_new_tokens=7).token_ids == want
    assert model.generate(ids, max_new_tokens=7).token_ids == want


@pytest.mark.parametrize("call", ["generate", "generate_baseline"])
@pytest.mark.parametrize("length, new, fit", [(ORIGINAL - 6, 8, "at most 7 new tokens fit (the last one is never fed)"),
                                              (ORIGINAL + 8, 2, f"prompts of at most {ORIGINAL - 1} tokens fit "
                                                                "with max_new_tokens 2")])
def test_a_longrope_call_past_original_max_position_embeddings_is_refused_before_any_forward(
        longrope, monkeypatch, call, length, new, fit):
    """transformers rotates with the long factors once a forward reaches past original_max_position_embeddings
    (a prefill past it: the whole prompt); draftsmith's factors are fixed at load (the short ones), so such a call
    decoded differently from transformers, silently. It is refused, naming the field and the limit."""
    from draftsmith.decoding import engine
    from draftsmith.errors import ArgumentError

    model, _ = longrope
    monkeypatch.setattr(engine, "prefill", lambda *a, **k: pytest.fail("a forward ran"))
    with pytest.raises(ArgumentError) as err:
        getattr(model, call)(prompt(length), max_new_tokens=new)
    msg = str(err.value)
    assert msg.startswith(f"{call}(): 1 problem"), msg
    assert f"longrope original_max_position_embeddings is {ORIGINAL}" in msg and fit in msg, msg


def test_a_longrope_problem_names_max_new_tokens_as_the_caller_does(longrope):
    from draftsmith.decoding.arguments import check_call
    from draftsmith.errors import ArgumentError

    names = {"max_new_tokens": "--max-new-tokens"}   # the command line's (draftsmith generate)
    for length, says in [(ORIGINAL - 6, "--max-new-tokens is 8: with a"),
                         (ORIGINAL + 8, "prompt + --max-new-tokens 8")]:
        with pytest.raises(ArgumentError) as err:
            check_call(longrope[0], prompt(length), max_new_tokens=8, names=names)
        assert says in str(err.value) and "max_new_tokens" not in str(err.value), str(err.value)
