"""generate --seed with greedy decoding (--temperature 0, the default) ran and ignored the seed, exit 0: an option
that would be ignored is refused, as bench's options of the other benchmark are (h94). With sampling it is taken."""
from typer.testing import CliRunner

from draftsmith.cli import app


def test_a_seed_without_sampling_is_refused_before_anything_loads(monkeypatch):
    import draftsmith

    monkeypatch.setattr(draftsmith, "load_spec", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("loaded")))
    res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--seed", "5", "--max-new-tokens", "3"])
    assert res.exit_code == 2, res.output
    assert ("error: --seed 5: greedy decoding (--temperature 0) draws nothing, so the seed would be ignored; give "
            "--temperature > 0 to sample, or leave --seed out") in res.output
    res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--seed", "5", "--temperature", "0.7"])
    assert res.exit_code == 70 and "loaded" in res.output, res.output   # past the options' checks
