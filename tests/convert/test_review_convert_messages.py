"""convert's messages as a user reads them: an unknown --to with the closest layout, and a layout's tensor patterns
as the names they match, not as a regex's repr."""
import pytest
from typer.testing import CliRunner

from draftsmith.cli import app


@pytest.fixture(scope="module")
def eagle3(tmp_path_factory):
    from draftsmith.testing import write_eagle3, write_target

    root = tmp_path_factory.mktemp("review-convert")
    return write_eagle3(root / "e3", write_target(root / "tgt"))


def convert(*args):
    return CliRunner().invoke(app, ["convert", *map(str, args)], env={"COLUMNS": "1000"})


def test_an_unknown_layout_gets_the_closest(eagle3, tmp_path):
    res = convert(eagle3, "--to", "midlayr", tmp_path / "out")
    assert res.exit_code == 2 and "unknown layout 'midlayr'" in res.output, res.output
    assert "Did you mean 'midlayer'?" in res.output and not (tmp_path / "out").exists()


def test_a_layouts_norms_are_said_by_name(eagle3, tmp_path):
    res = convert(eagle3, "--to", "eagle1-speculators", tmp_path / "out")
    assert res.exit_code == 1 and "\\" not in res.output, res.output
    assert ("holds fc.embed_norm.weight, layers.0.input_layernorm.weight, norm.weight all or none (one config flag "
            "says them); this draft holds layers.0.input_layernorm.weight, norm.weight, not fc.embed_norm.weight"
            in " ".join(res.output.split())), res.output


@pytest.mark.parametrize("pattern, shown", [
    (r"^fc\.embed_norm\.weight$", "fc.embed_norm.weight"),
    (r"^layers\.\d+\.input_layernorm\.weight$", r"^layers\.\d+\.input_layernorm\.weight$"),   # a regex: as written
    (r"^norm\.weight", r"^norm\.weight"),   # not anchored at both ends: it matches more than one name
])
def test_as_name(pattern, shown):
    from draftsmith.convert.name_checks import as_name

    assert as_name(pattern) == shown
