"""Mutation round 13: draftsmith/cli/app.py's error reporting, pinned where a planted bug survived the other tests:
the documented exit codes (1, 2, 70, 74, 141) as the commands end with them; report() (which stream, which code, the
first line of a message cut past 300 characters, no ": " after an empty message); plugin_at_fault() (a plugin's own
frame blamed by its name, draftsmith's never, no registry built to ask); setting_problems() naming each option, and
the spec detect_spec() proposes naming the draft folder cut past 300 characters. The stdout wrapper's message:
tests/test_cli_app_kills_round12.py; the round's tests of draftsmith.testing's writers:
test_app_testing_kills_round13.py.
"""
import importlib
import types

import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.errors import DraftsmithError, OptionError

from test_app_testing_kills_round13 import TARGET, config_only   # a target folder with only its config.json


app_module = importlib.import_module("draftsmith.cli.app")   # the module: draftsmith.cli.app is the Typer


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000"})


# --- the exit codes, as a command ends with them ------------------------------------------------------------------

@pytest.fixture
def inspect_raises(monkeypatch):
    """``draftsmith inspect`` whose inspection raises the given exception (the command's own code failing)."""
    import draftsmith.convert.inspect as inspect_module

    def with_(exc):
        def boom(*_a, **_k):
            raise exc
        monkeypatch.setattr(inspect_module, "inspect_checkpoint", boom)
        return run("inspect", ".")
    return with_


def test_each_documented_exit_code_ends_the_command(inspect_raises):
    assert inspect_raises(DraftsmithError("bad input")).exit_code == 1
    assert inspect_raises(OptionError("bad option")).exit_code == 2
    assert inspect_raises(RuntimeError("a bug")).exit_code == 70
    res = inspect_raises(BrokenPipeError(32, "Broken pipe"))   # the reader left: quietly, as a SIGPIPE'd tool
    assert (res.exit_code, res.output) == (141, "")
    res = inspect_raises(app_module.OutputFailed("No space left on device"))
    assert (res.exit_code, res.stderr) == (74, "error: cannot write the output: No space left on device\n")


def test_the_exit_code_constants_are_the_documented_numbers():
    from draftsmith.cli import INTERNAL_ERROR, OUTPUT_ERROR, USAGE_ERROR, USER_ERROR

    assert (USER_ERROR, USAGE_ERROR, INTERNAL_ERROR, OUTPUT_ERROR, app_module.SIGPIPE_EXIT) == (1, 2, 70, 74, 141)


# --- report(): the stream, the code, the one line -----------------------------------------------------------------

def test_draftsmiths_errors_are_said_on_stderr_with_their_notes(capsys):
    exc = DraftsmithError("the draft is a target")
    exc.add_note("note: folders swapped?")
    assert app_module.report(exc) == 1
    assert capsys.readouterr() == ("", "error: the draft is a target\nnote: folders swapped?\n")
    assert app_module.report(OptionError("device 'cuda:7' is not on this machine")) == 2
    assert capsys.readouterr() == ("", "error: device 'cuda:7' is not on this machine\n")


HINT = "\n  rerun with `draftsmith --debug ...` for the traceback\n"


def test_anything_else_is_an_internal_error_on_stderr_its_first_line_only(capsys):
    assert app_module.report(RuntimeError("  first line\nsecond line\nthird")) == 70
    assert capsys.readouterr() == ("", f"internal error: RuntimeError: first line{HINT}")
    assert app_module.report(KeyError()) == 70   # no message: the type alone, no ": "
    assert capsys.readouterr() == ("", f"internal error: KeyError{HINT}")


@pytest.mark.parametrize("length, cut", [(300, False), (301, True)])
def test_the_first_line_of_an_internal_error_is_cut_past_300_characters(length, cut, capsys):
    line = "x" * (length - 1) + "y"
    app_module.report(ValueError(line + "\nsecond"))
    said = capsys.readouterr().err.splitlines()[0].removeprefix("internal error: ValueError: ")
    assert (said == line) is not cut and len(said) == (299 if cut else 300), said
    assert said.endswith("y") and ("..." in said) is cut


def test_a_plugins_error_is_a_user_error_on_stderr_naming_the_plugin(monkeypatch, capsys):
    monkeypatch.setattr(app_module, "plugin_at_fault", lambda exc: "plugin 'p' (in p.f, line 3)")
    assert app_module.report(ValueError("nope")) == 1
    assert capsys.readouterr() == ("", f"error: plugin 'p' (in p.f, line 3) raised ValueError: nope{HINT}")


# --- plugin_at_fault(): whose frame raised ------------------------------------------------------------------------

def raised_in(module_name: str) -> BaseException:
    """An exception raised by ``boom`` (line 2) of a module called ``module_name``."""
    module = types.ModuleType(module_name)
    exec(compile("def boom():\n    raise ValueError('the plugin is wrong')\n", f"<{module_name}>", "exec"),
         module.__dict__)
    try:
        module.boom()
    except ValueError as e:
        return e
    raise AssertionError("boom did not raise")


@pytest.fixture
def installed(monkeypatch, request):
    """Make a registry with these (name, plugin object) pairs the process-wide one, built, until the test ends."""
    import draftsmith
    import draftsmith.registry.registry as registry_module

    def with_(*plugins):
        reg = draftsmith.build_registry(plugins=list(plugins), entry_points=False)
        monkeypatch.setattr(registry_module, "build_registry", lambda **_: reg)
        registry_module.default_registry.cache_clear()
        request.addfinalizer(registry_module.default_registry.cache_clear)
        registry_module.default_registry()
        return reg
    return with_


def plugin_from(module_name: str) -> object:
    """A plugin object (no hooks) whose class is defined in ``module_name``."""
    return type("Thing", (), {"__module__": module_name})()


def test_the_plugins_deepest_frame_is_named_with_the_plugins_name(installed):
    installed(("acme", plugin_from("acme_draft13.parts")))
    assert app_module.plugin_at_fault(raised_in("acme_draft13.parts.norms")) == \
        "plugin 'acme' (in acme_draft13.parts.norms.boom, line 2)"
    assert app_module.plugin_at_fault(raised_in("other_pkg13.norms")) is None   # not the plugin's package


def test_a_module_plugin_is_known_by_its_module_name(installed):
    module = types.ModuleType("acme_module13.hooks")
    installed(("acmemod", module))
    assert app_module.plugin_at_fault(raised_in("acme_module13")) == \
        "plugin 'acmemod' (in acme_module13.boom, line 2)"


def test_a_plugin_defined_inside_draftsmith_never_makes_draftsmiths_frames_a_plugins(installed):
    installed(("inside", plugin_from("draftsmith.inside13")))
    assert app_module.plugin_at_fault(raised_in("draftsmith.assembler.somewhere")) is None
    assert app_module.plugin_at_fault(raised_in("draftsmith")) is None


def test_no_registry_built_means_no_plugin_is_asked_and_none_is_built():
    import draftsmith.registry.registry as registry_module

    registry_module.default_registry.cache_clear()
    try:
        assert app_module.plugin_at_fault(raised_in("acme_draft13.parts")) is None
        assert registry_module.default_registry.cache_info().currsize == 0
    finally:
        registry_module.default_registry.cache_clear()


# --- setting_problems(), detect_spec(): what a command checks and proposes before any load ------------------------

def test_the_settings_at_their_defaults_have_no_problem_and_each_problem_names_its_option():
    assert app_module.setting_problems(1) == [] and app_module.setting_problems(64, 0.7, seed=3) == []
    problems = app_module.setting_problems(0, -1.0, seed=2 ** 64)
    assert [p.split(" ")[0] for p in problems] == ["--max-new-tokens", "--temperature", "--seed"], problems


@pytest.mark.parametrize("length, cut", [(300, False), (301, True)])
def test_the_proposed_spec_names_the_draft_folder_cut_past_300_characters(length, cut, tmp_path, capsys):
    from draftsmith.errors import short_text
    from draftsmith.testing import write_eagle3

    target = config_only(tmp_path / "t", **TARGET)
    draft = tmp_path / ("a" * 150) / ("b" * (length - len(str(tmp_path)) - 152))
    assert len(str(draft)) == length
    spec = app_module.detect_spec(write_eagle3(draft, target))
    assert spec.source == f"the spec inspect proposes for {short_text(draft, 300)}"
    assert (str(draft) in spec.source) is not cut and ("..." in spec.source) is cut
    assert capsys.readouterr().out.startswith("spec ")


# --- survivors left, and why they are equivalent -------------------------------------------------------------------
# app.py:177 vocab=0 -> 1: settings_problems reads vocab only for top_k (passed 0: 0 <= 0 <= vocab holds for 0 and 1)
#   and for stop (passed None): no setting gives a problem under one and not the other.
