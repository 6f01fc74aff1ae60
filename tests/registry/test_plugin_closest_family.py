"""inspect's closest families score a plugin's specs too (by their rules and holds: no detection row), so a plugin
layout its detector declined (a config without the plugin's marker) is still offered, with `--spec` to try; only
draftsmith's own detection rows were scored (a plugin-authoring helper)."""
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.hooks import SpecSource
from draftsmith.testing import write_eagle3, write_target
from test_plugin_mistakes import installed, spec_file
from test_plugins import Plugin, fresh


def test_a_plugin_spec_whose_rules_place_every_name_is_the_closest(tmp_path, monkeypatch, request):
    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target)
    file = draft / "model.safetensors"
    save_file({k.replace("midlayer.", "acme.blk."): v for k, v in load_file(str(file)).items()}, str(file))
    spec = spec_file(tmp_path, {"kind": "rms"}, name="acme-draft",
                     rules=[{"match": r"^acme\.blk\.", "replace": "layers.0."}])
    installed(fresh(("acme", Plugin(specs=[SpecSource("acme-draft", spec)]))), monkeypatch, request)
    res = CliRunner().invoke(app, ["inspect", str(draft)])
    assert res.exit_code == 1, res.output
    first = res.stderr.splitlines()[1]
    assert first == ("  closest: acme-draft (100% fit, by its rules alone: a spec of plugin 'acme'); names that did "
                     "not fit: none; try --spec acme-draft; to have it recognised without --spec (inspect, generate "
                     "--draft), a plugin's draftsmith_detect_layout hook says which spec loads it (README, \"Adding "
                     "components from a package\")"), res.stderr
    res = CliRunner().invoke(app, ["generate", "--spec", "acme-draft", "--target", str(target), "--draft", str(draft),
                                   "--token-ids", "1,2", "--max-new-tokens", "2", "--no-compare", "--threads", "1"])
    assert res.exit_code == 0, res.output   # and the offered spec loads it
    res = CliRunner().invoke(app, ["inspect", str(draft), "--spec", "acme-draft"])   # the hint, followed where given
    assert res.exit_code == 0, res.output   # (inspect had no --spec: "No such option", exit 2)
    assert f"# {draft}: read with the spec given, 'acme-draft'" in res.stdout.splitlines()


def test_a_plugin_spec_that_fails_or_places_nothing_is_not_offered(tmp_path, monkeypatch, request):
    """A plugin whose holds raises made every unknown layout's inspect (and a swapped pair's generate) fail naming
    it; a spec that does not load or places no name was offered at 0% ahead of the built-ins (found by a review)."""
    from draftsmith.components.fusion import Eagle3Params, eagle3
    from draftsmith.hooks import Component

    def holds(params):
        raise KeyError("fc_kind")

    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target)
    file = draft / "model.safetensors"
    save_file({k.replace("midlayer.", "acme.blk."): v for k, v in load_file(str(file)).items()}, str(file))
    failing = spec_file(tmp_path, {"kind": "rms"}, name="failing-draft")
    failing.write_text(failing.read_text().replace("kind: eagle3", "kind: mine", 1))
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: [unclosed\n")
    plugin = Plugin([Component("fusion", "mine", eagle3, Eagle3Params, holds=holds)],
                    [SpecSource("failing-draft", failing), SpecSource("bad-draft", bad_yaml)])
    installed(fresh(("acme", plugin)), monkeypatch, request)
    res = CliRunner().invoke(app, ["inspect", str(draft)])
    assert res.exit_code == 1, res.output
    closest = [line.split()[1] for line in res.stderr.splitlines() if line.startswith("  closest: ")]
    assert closest and not {"failing-draft", "bad-draft"} & set(closest), res.stderr
    assert "fusion 'mine'" not in res.stderr
    odd = tmp_path / "odd"   # one tensor no family places: every score 0, no offer (round 26), the way to a spec
    odd.mkdir()
    (odd / "config.json").write_text((draft / "config.json").read_text())
    save_file({"foo.bar": load_file(str(file))["fc.weight"]}, str(odd / "model.safetensors"))
    res = CliRunner().invoke(app, ["inspect", str(odd)])
    assert "  closest: " not in res.stderr and "failing-draft" not in res.stderr, res.stderr
    assert "  no registered family places any of these names: write a spec" in res.stderr, res.stderr
