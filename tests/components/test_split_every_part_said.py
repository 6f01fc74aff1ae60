"""A split rule says every part of ``into`` that does not fit its match, not only the first (h81: a second bad part
was found only after the first was fixed)."""
import pytest

from draftsmith.errors import SpecError
from draftsmith.specs.loader import load_spec


def test_every_bad_part_is_said_at_once(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("extends: eagle3-llama\nname: s\nweights:\n  rules:\n  - kind: split\n"
                 "    match: '^blocks\\.(\\d+)\\.qkv\\.'\n"
                 "    into: ['layers.\\1.self_attn.q_proj.', 'layers.\\9.k_proj.', 'layers.\\8.v_proj.']\n")
    with pytest.raises(SpecError) as e:
        load_spec(f)
    msg = str(e.value)
    assert "'layers.\\9.k_proj.'" in msg and "'layers.\\8.v_proj.'" in msg and "q_proj" not in msg, msg
    assert msg.count("is not a valid regex rename") == 2, msg
