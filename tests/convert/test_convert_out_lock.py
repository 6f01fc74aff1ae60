"""Two converts into one OUT: the second is refused while the first holds the folder, and nothing of the first's
is touched (its failure cleanup deleted every file in OUT, the first run's finished draft included)."""
import pytest

from draftsmith.convert.canonical import ConvertError
from draftsmith.convert.run import convert
from draftsmith.folder_lock import exclusive
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    root = tmp_path_factory.mktemp("lock")
    return write_eagle3(root / "d", write_target(root / "t"))


def test_a_convert_into_a_folder_another_holds_is_refused_and_touches_nothing(draft, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with exclusive(out) as mine:     # as another convert holds it while it writes
        assert mine
        (out / "config.json").write_text("{}")   # ... what it has written so far
        with pytest.raises(ConvertError, match="is not empty|in use by another process"):
            convert(draft, "layers", out)
        (out / "config.json").unlink()           # empty again, still held: refused as in use
        with pytest.raises(ConvertError, match="in use by another process"):
            convert(draft, "layers", out)
        assert out.is_dir()
    convert(draft, "layers", out)                # released: it converts
    assert {p.name for p in out.iterdir()} == {"config.json", "model.safetensors"}


def test_a_second_holder_is_told_at_once(tmp_path):
    with exclusive(tmp_path) as first, exclusive(tmp_path) as second:
        assert first and not second
    with exclusive(tmp_path) as again:
        assert again
