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
