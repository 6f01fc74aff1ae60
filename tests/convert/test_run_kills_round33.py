"""Mutation round 33 (convert.run._convert's refusal of names no rule of the reading spec read): at most four names
are quoted (then 'and N more'), and the source folder in the header and in the
`draftsmith inspect` hint is cut past 300 characters."""
import shutil

import pytest

from draftsmith.convert.canonical import ConvertError
from draftsmith.convert.run import convert
from draftsmith.testing import write_eagle3, write_target

SPEC = ("name: vendor\nextends: eagle3-llama\nweights:\n  rules:\n"
        "    - {match: '^decoder\\.blocks\\.(\\d+)\\.', replace: 'layers.\\1.',\n"
        "       inverse: ['^layers\\.(\\d+)\\.', 'decoder.blocks.\\1.']}\n")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("r33")
    draft = write_eagle3(root / "d", write_target(root / "t"), draft_vocab=40)
    (root / "vendor.yaml").write_text(SPEC)
    return root, draft


def _refusal(src, spec, out) -> str:
    with pytest.raises(ConvertError) as e:
        convert(src, "midlayer", out, spec=spec)
    return str(e.value)


def test_four_stray_names_are_quoted_then_the_count(made, tmp_path):
    root, draft = made
    msg = _refusal(draft, root / "vendor.yaml", tmp_path / "o")   # ten midlayer.* names no rule reads
    assert "'midlayer.mlp.gate_proj.weight' and 6 more matched no rule of spec" in msg, msg
    assert "'midlayer.mlp.down_proj.weight', 'midlayer.mlp.gate_proj.weight' and" in msg, msg


@pytest.mark.parametrize("extra", [0, 1])   # a source path of 300 characters: said whole; of 301: cut
def test_the_source_folder_is_cut_past_300(made, tmp_path, extra):
    root, draft = made
    pad = 300 + extra - len(str(tmp_path)) - 2
    deep = tmp_path / ("p" * 200) / ("q" * (pad - 200))
    src = shutil.copytree(draft, deep)
    assert len(str(src)) == 300 + extra
    msg = _refusal(src, root / "vendor.yaml", tmp_path / "o")
    if extra == 0:
        assert msg.startswith(f"{src} cannot be written as midlayer") and f"inspect {src} --spec" in msg, msg
    else:
        cut = f"{str(src)[:148]}...{str(src)[-148:]}"
        assert str(src) not in msg, msg
        assert msg.startswith(f"{cut} cannot be written as midlayer") and f"inspect {cut} --spec" in msg, msg
