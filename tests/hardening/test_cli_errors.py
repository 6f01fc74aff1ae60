"""The command line: draftsmith's errors as one plain message (exit 1), bugs as one line + --debug (exit 70)."""
import pytest
import yaml
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import INTERNAL_ERROR, USER_ERROR, app
from draftsmith.specs.catalog import BUILTIN_DIR

WIDE = {"COLUMNS": "1000"}


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env=WIDE)


def one_message(res, says, code=USER_ERROR):
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output and says in res.stderr, res.stderr
    assert res.stderr.startswith("error: ")


def test_inspect_on_a_missing_folder_or_a_folder_that_is_no_checkpoint(tmp_path):
    one_message(run("inspect", tmp_path / "nope"), "does not exist")
    one_message(run("inspect", tmp_path), "no config.json")
    (tmp_path / "config.json").write_text("[1]")
    one_message(run("inspect", tmp_path), "config.json: the file holds a JSON list")


def test_generate_refuses_bad_options_before_loading():
    one_message(run("generate", "--device", "cuda:7"), "device 'cuda:7'", code=2)   # bad option values: usage, 2
    one_message(run("generate", "--dtype", "int8"), "dtype 'int8' is not a weight dtype", code=2)
    one_message(run("generate", "--spec", "nope"), "no spec named 'nope'")
    for args in [("generate", "--threads", "0"), ("bench", "--repeats", "0"), ("generate", "--max-new-tokens", "0"),
                 ("generate", "--temperature", "-1")]:
        res = run(*args)
        assert res.exit_code == 2 and "Invalid value" in res.output and "Traceback" not in res.output


def test_a_bad_checkpoint_is_one_message(tiny_pair, tmp_path):
    draft = tmp_path / "d"
    draft.mkdir()
    for f in tiny_pair[1].iterdir():
        (draft / f.name).write_bytes(f.read_bytes())
    (draft / "model.safetensors").write_bytes(b"\0" * 3)
    res = run("generate", "--spec", "eagle3-llama", "--target", tiny_pair[0], "--draft", draft, "--token-ids", "1")
    one_message(res, "model.safetensors: not a readable safetensors file")


def test_an_unexpected_exception_is_one_line_and_a_debug_hint(monkeypatch):
    import draftsmith.specs.loader as loader

    def boom(*_a, **_k):
        raise RuntimeError("a bug\nsecond line")

    monkeypatch.setattr(loader, "parse_spec", boom)
    res = run("generate")
    assert res.exit_code == INTERNAL_ERROR
    assert res.stderr == ("internal error: RuntimeError: a bug\n"
                          "  rerun with `draftsmith --debug ...` for the traceback\n")
    res = run("--debug", "generate")
    assert isinstance(res.exception, RuntimeError)  # --debug: the exception (and its traceback) is not swallowed


def test_user_text_is_never_rich_markup(tiny_pair):
    res = run("generate", "--spec", "eagle3-llama", "--target", tiny_pair[0], "--draft", tiny_pair[1],
              "--prompt", "[bold red]x[/]", "--max-new-tokens", "2", "--no-compare")
    # the target has no tokenizer: the error quotes the prompt's problem, plainly (an option's, before the load)
    one_message(res, "a text prompt needs a tokenizer", code=2)
    res = run("generate", "--spec", "demo", "--prompt", "[bold red]hi[/] [link=x]y", "--max-new-tokens", "2",
              "--no-compare")
    assert res.exit_code == 0 and "'[bold red]hi[/] [link=x]y'" in res.stdout


def test_validate_goes_on_after_any_failure_and_warns_about_missing_checkpoints(tmp_path, monkeypatch):
    good = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    good["checkpoints"] = {"target": "no-such-target", "draft": str(tmp_path)}
    files = [tmp_path / n for n in ("a.yaml", "b.yaml", "c.yaml", "d.yaml")]
    files[0].write_bytes(b"\xff\xfe binary \x00")
    files[1].write_text(yaml.safe_dump(good))
    files[2].write_text("name: &a [*a]\n")
    files[3].write_text(yaml.safe_dump({**good, "name": "d"}))
    res = run("validate", *files)
    assert res.exit_code == 1
    assert f"{files[0]} has 1 problem" in res.stderr and f"{files[2]} has 1 problem" in res.stderr
    assert f"{files[1]}: ok (eagle3-llama)" in res.stdout and f"{files[3]}: ok (d)" in res.stdout
    assert f"{files[1]}: warning: checkpoints.target '{tmp_path / 'no-such-target'}' is not a folder" in res.stderr
    assert "checkpoints.draft" not in res.stderr

    import draftsmith.specs.loader as loader
    real = loader.parse_spec
    monkeypatch.setattr(loader, "parse_spec", lambda data, **kw: (_ for _ in ()).throw(KeyError("bug"))
                        if data.get("name") == "d" else real(data, **kw))
    res = run("validate", files[3], files[1])
    assert res.exit_code == 1 and "internal error: KeyError" in res.stderr and f"{files[1]}: ok" in res.stdout


@pytest.mark.parametrize("folder", ["my draft", "dräft ü", "Draft_V2 (copy)", "-x-", "a\nb"])
def test_inspect_prints_a_spec_that_validate_accepts_for_any_folder_name(tiny_pair, tmp_path, folder):
    draft = tmp_path / folder
    draft.mkdir()
    for f in tiny_pair[1].iterdir():
        (draft / f.name).write_bytes(f.read_bytes())
    res = run("inspect", draft)
    assert res.exit_code == 0, res.output
    out = tmp_path / "printed.yaml"
    out.write_text(res.stdout)
    spec = draftsmith.load_spec(out)
    assert spec.checkpoints.draft == str(draft.resolve())
    res = run("validate", out)
    assert res.exit_code == 0 and "warning" not in res.stderr, res.output
