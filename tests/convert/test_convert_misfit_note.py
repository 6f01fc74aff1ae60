"""A folder that does not load with the spec it is read with (`convert --spec`) or detected as is still written,
tensor for tensor (convert moves names; it mends nothing), and now says so in a note naming the misfits: the hunt
found `convert --spec` exit 0 with no word for specs assemble() refuses against the same draft."""
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target


def test_a_source_its_spec_refuses_is_written_with_a_note(tmp_path, caplog):
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=40)
    spec = tmp_path / "own.yaml"
    spec.write_text("name: own\nextends: eagle3-llama\ndraft:\n  share: {embed: own}\n")
    res = CliRunner().invoke(app, ["convert", str(draft), "--spec", str(spec), "--to", "speculators",
                                   str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert (f"note: {draft} does not load with spec {spec} as it is (missing: 'embed_tokens.weight'); convert "
            "writes the tensors it holds, as they are") in caplog.text


def test_a_source_that_fits_gets_no_note(tmp_path, caplog):
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=40)
    res = CliRunner().invoke(app, ["convert", str(draft), "--to", "speculators", str(tmp_path / "out")])
    assert res.exit_code == 0 and "does not load" not in caplog.text, res.output
