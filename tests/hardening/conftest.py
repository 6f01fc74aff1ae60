"""A tiny checkpoint pair for the hardening tests, written once per session."""
import pytest

from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    """A tiny llama target (8 layers, vocab 32, context 64) and an EAGLE-3 midlayer draft for it."""
    root = tmp_path_factory.mktemp("hardening-pair")
    target = write_target(root / "target", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32, max_position_embeddings=64)
    draft = write_eagle3(root / "draft", target)
    return target, draft
