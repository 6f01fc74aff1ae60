"""draftsmith.testing's writers make folders a user can decode text with."""
import pytest

import draftsmith
from draftsmith.testing import write_eagle3, write_target


def test_a_target_written_with_its_tokenizer_decodes_text(tmp_path):
    write_target(tmp_path / "t", tokenizer=True)
    write_eagle3(tmp_path / "d", tmp_path / "t")
    model = draftsmith.assemble("eagle3-llama", target=tmp_path / "t", draft=tmp_path / "d")
    out = model.generate("hello world", max_new_tokens=5, stop=[])
    assert len(out.token_ids) == 5 and isinstance(out.text, str)
    assert model.stop_ids == {257}


def test_a_vocabulary_too_small_for_the_byte_tokenizer_is_refused(tmp_path):
    with pytest.raises(ValueError, match="vocab_size 96 would not embed"):
        write_target(tmp_path / "t", tokenizer=True, vocab_size=96)
    assert not (tmp_path / "t").exists()


def test_a_write_cut_off_in_its_weights_leaves_no_config(tmp_path, monkeypatch):
    """config.json is written last: a folder holding one is whole (bench --scale keeps such a draft and failed on
    every later run after a Ctrl-C in the weight write)."""
    import draftsmith.testing as testing

    target = write_target(tmp_path / "t")

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(testing, "save_safetensors", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_eagle3(tmp_path / "d", target)
    assert not (tmp_path / "d" / "config.json").exists()


def test_write_self_draft_refuses_a_tied_target_by_name(tmp_path):
    # a helper's search: KeyError: 'lm_head.weight' (its head is rescaled, and a tied one is the embedding)
    from draftsmith.testing import write_self_draft

    target = write_target(tmp_path / "t", num_hidden_layers=2, tie_word_embeddings=True)
    with pytest.raises(ValueError, match="write_self_draft rescales the target's head, and .* has none of its own"):
        write_self_draft(tmp_path / "d", target)
