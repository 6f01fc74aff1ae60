"""`convert --spec S` of a folder whose names S's rules do not read (a midlayer draft read with a spec written for
another vendor's names) was an internal error (ValueError from from_canonical, exit 70) before the refusal lines
convert already had for it: it is a ConvertError naming the names and the spec, exit 1, and nothing is written."""
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target


def test_names_no_rule_reads_are_refused_not_an_internal_error(tmp_path):
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=40)
    spec = tmp_path / "vendor.yaml"
    spec.write_text("name: vendor\nextends: eagle3-llama\nweights:\n  rules:\n"
                    "    - {match: '^decoder\\.blocks\\.(\\d+)\\.', replace: 'layers.\\1.',\n"
                    "       inverse: ['^layers\\.(\\d+)\\.', 'decoder.blocks.\\1.']}\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["convert", str(draft), "--spec", str(spec), "--to", "midlayer", str(out)])
    assert res.exit_code == 1, res.output
    assert "internal error" not in res.output
    assert "'midlayer.hidden_norm.weight'" in res.output and f"matched no rule of spec {spec}" in res.output
    assert not out.exists()
