"""The typer application, its consoles and its error reporting (the module docstring of
:mod:`draftsmith.cli` says how errors print); the command modules register their verbs on :data:`app`."""
from __future__ import annotations

import errno
import inspect
import os
import shutil
import sys
from pathlib import Path

import click
import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from draftsmith.cli.usage import argument_hint
from draftsmith.errors import DraftsmithError, OptionError, short, short_text

USER_ERROR, INTERNAL_ERROR = 1, 70
USAGE_ERROR = 2      # a bad option value: typer's own code for one (click.UsageError), whatever the command
SIGPIPE_EXIT = 141   # 128 + SIGPIPE: what a shell reports for a writer whose reader closed the pipe
OUTPUT_ERROR = 74    # EX_IOERR: the output cannot be written (stdout closed, a full disk, an I/O error)

# click's exceptions, from the click package and from the copy typer >= 0.20 vendors (either may raise them)
_CLICK_MODULES = [click.exceptions]
try:
    from typer._click import exceptions as _vendored

    _CLICK_MODULES.append(_vendored)
except ImportError:  # pragma: no cover (typer using the click package)
    pass


def _click_classes(*names: str) -> tuple[type[BaseException], ...]:
    return tuple({getattr(m, n) for m in _CLICK_MODULES for n in names if hasattr(m, n)})


# Exceptions click/typer turn into usage messages and exit codes themselves
PASS_THROUGH = (typer.Exit, typer.Abort, *_click_classes("Exit", "ClickException", "Abort"))
USAGE_ERRORS = _click_classes("UsageError")   # a bad option or argument: said on an `error:` line (_Group.main)
HELP_ONLY = _click_classes("NoArgsIsHelpError")   # no arguments at all: the help is the answer, as typer prints it


def report(exc: BaseException) -> int:
    """Print ``exc`` for a user (plain text, on stderr) and return the exit code: 2 for a bad option value (an
    OptionError, whichever command raised it), 1 for draftsmith's other errors, 70 for anything else; after a
    Ctrl-C, a KeyboardInterrupt instead (:func:`stop_if_interrupted`: the error is its echo)."""
    stop_if_interrupted()
    if isinstance(exc, DraftsmithError):
        notes = "".join(f"\n{n}" for n in getattr(exc, "__notes__", ()))  # e.g. assemble's "folders swapped?"
        typer.echo(f"error: {exc}{notes}", err=True)
        return USAGE_ERROR if isinstance(exc, OptionError) else USER_ERROR
    if (said := file_fault(exc)) is not None:   # the machine's answer about a file the user named: no bug
        typer.echo(f"error: {said}", err=True)
        return USER_ERROR
    first = short_text(str(exc).strip().splitlines()[0] if str(exc).strip() else "", 300)
    said = f"{type(exc).__name__}{': ' + first if first else ''}"
    hint = "\n  rerun with `draftsmith --debug ...` for the traceback"
    if (where := plugin_at_fault(exc)) is not None:   # a plugin's code raised: its mistake, said as the plugin's
        typer.echo(f"error: {where} raised {said}{hint}", err=True)
        return USER_ERROR
    typer.echo(f"internal error: {said}{hint}", err=True)
    return INTERNAL_ERROR


# what a file system answers about a path, whoever asked: the user's file or folder, not draftsmith's bug
FILE_ERRNOS = frozenset(getattr(errno, n) for n in ("EACCES", "EPERM", "ENAMETOOLONG", "ELOOP", "EROFS", "ENOSPC",
                                                  "EDQUOT", "EIO", "ENXIO") if hasattr(errno, n))


def file_fault(exc: BaseException) -> str | None:
    """"PATH: Permission denied" for an OSError a file system raised about a named path (unreadable, a name too
    long, a link loop, a full or read-only disk), else None. Any check that forgot such a path still says it as the
    user's file, not as an internal error."""
    if not isinstance(exc, OSError) or exc.errno not in FILE_ERRNOS or exc.filename is None:
        return None
    return f"{short_text(os.fsdecode(exc.filename), 300)}: {exc.strerror or os.strerror(exc.errno)}"


def plugin_at_fault(exc: BaseException) -> str | None:
    """"plugin 'NAME' (in module.function, line N)" where ``exc`` was raised inside an installed plugin's code (its
    deepest frame in a plugin's top-level package, or in another top-level package of the distribution that
    installed it; a plugin's forward that raises while draftsmith decodes), else None. Only a registry already
    built is asked: an error before one is built cannot come from a plugin's code."""
    import importlib.metadata

    from draftsmith.registry import registry as registry_module
    from draftsmith.registry.checks import deepest_frame

    if not registry_module.default_registry.cache_info().currsize:
        return None
    packages = {}
    for name, plugin in registry_module.default_registry().pm.list_name_plugin():
        module = plugin.__name__ if isinstance(plugin, type(sys)) else type(plugin).__module__
        if name != registry_module.BUILTIN and module.partition(".")[0] != "draftsmith":
            packages.setdefault(module.partition(".")[0], name)
    if packages:   # a distribution's other top-level packages are its plugin's too (bad13 beside bad13_models)
        dists = importlib.metadata.packages_distributions()
        for package, plugin_name in list(packages.items()):
            for dist in dists.get(package, ()):
                packages.update({other: plugin_name for other, ds in dists.items()
                                 if dist in ds and other not in packages and other != "draftsmith"})
    found = deepest_frame(exc, packages)
    return None if found is None else f"plugin {packages[found[0].partition('.')[0]]!r} (in {found[1]})"


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit does not raise into a closed pipe again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stdout with no file descriptor (captured): nothing to flush
        pass


class OutputFailed(Exception):
    """Writing stdout failed (not an OSError, so no handler of a file's OSError in a command takes it for one)."""


class _Output:
    """stdout while a command runs: every attribute is the stream's own, and an OSError of its ``write`` or
    ``flush`` (a full disk, an I/O error) is an :class:`OutputFailed`, told apart from a file's OSError. A closed
    pipe stays a BrokenPipeError (ended quietly, 141)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputFailed(e.strerror or str(e)) from e

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputFailed(e.strerror or str(e)) from e


class _Group(TyperGroup):
    """Runs a command and turns its exceptions into one message and an exit code (see the module docstring)."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        """typer's main, but a usage error (a bad option value, an unknown option, a missing argument) is said on an
        `error:` line and the command's help hint (typer draws it in a box), exit 2 as typer's."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        given = kwargs["args"] if kwargs.get("args") is not None else args[0] if args else sys.argv[1:]
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except HELP_ONLY as e:   # no arguments at all: the help is the answer (typer's rich mode printed it)
            if narrow():   # click's plain help is the exception's message
                try:
                    typer.echo(e.format_message())
                    sys.stdout.flush()
                except BrokenPipeError:   # `draftsmith | head -1`: as any help into a closed pipe
                    _drop_stdout()
                    sys.exit(SIGPIPE_EXIT)
            sys.exit(e.exit_code)
        except USAGE_ERRORS as e:
            # an option given no value is said before its command has a context (click's parser): named from the args
            command = next((a for a in given if a in self.commands), None)
            path = e.ctx.command_path if getattr(e, "ctx", None) else command and f"draftsmith {command}"
            where = f"\n  try '{path} --help' for its options" if path else ""
            typer.echo(f"error: {e.format_message()}{argument_hint(e)}{where}", err=True)
            sys.exit(e.exit_code)
        except SystemExit as e:   # `CMD --help | head -1`: rich's console exits 1 when the reader leaves
            if e.code == 1 and ("--help" in given or not given):   # help (no arguments: help, exit 2) failed
                sys.exit(SIGPIPE_EXIT)
            raise
        sys.exit(code if isinstance(code, int) else 0)

    def get_command(self, ctx: click.Context, name: str):
        # the commands table shows a command's first paragraph; typer's rich mode keeps its docstring's line breaks
        # there (a ragged column), so it gets the paragraph as one line to wrap
        cmd = super().get_command(ctx, name)
        if cmd is not None and cmd.help and not cmd.short_help:
            cmd.short_help = " ".join(inspect.cleandoc(cmd.help).split("\n\n")[0].split())
        if cmd is not None and narrow():
            cmd.rich_markup_mode = None   # its --help as the group's (format_help)
        return cmd

    def format_help(self, ctx: click.Context, formatter) -> None:
        if not narrow():
            return super().format_help(ctx, formatter)
        mode, self.rich_markup_mode = self.rich_markup_mode, None   # click's plain help: typer's, without rich
        try:
            return super().format_help(ctx, formatter)
        finally:
            self.rich_markup_mode = mode

    def invoke(self, ctx: click.Context):
        if sys.stdout is None:   # started with stdout closed (`>&-`): rich would drop every line, a write raise
            typer.echo("error: cannot write the output: standard output is closed", err=True)
            ctx.exit(OUTPUT_ERROR)
        real, sys.stdout = sys.stdout, _Output(sys.stdout)
        try:
            return self._run(ctx)
        finally:
            sys.stdout = real

    def _run(self, ctx: click.Context):
        try:
            try:
                result = super().invoke(ctx)
            except PASS_THROUGH:   # typer.Exit(0), a usage error: what the command printed is written first
                sys.stdout.flush()
                stop_if_interrupted()
                raise
            stop_if_interrupted()   # a Ctrl-C a library swallowed whole: the command still ends with 130
            sys.stdout.flush()     # what is still buffered is written while a failure can be said
            return result
        except PASS_THROUGH:
            raise
        except BrokenPipeError:  # `draftsmith list | head`: the reader left; stop quietly, as a SIGPIPE'd tool does
            _drop_stdout()
            ctx.exit(SIGPIPE_EXIT)
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            stop_if_interrupted()
            if isinstance(exc, OutputFailed):   # `draftsmith list > /dev/full`: one line, not an internal error
                _drop_stdout()   # what stays buffered is not flushed into the same failure at exit
                typer.echo(f"error: cannot write the output: {exc}", err=True)
                ctx.exit(OUTPUT_ERROR)
            ctx.exit(report(exc))


NARROW = 84   # columns below which --help is click's plain text: rich's panels cut option names and words ("--targ…"
# at 40 columns, train's "--prompts-per…" up to 77, a long word of its help up to 83)


def narrow() -> bool:
    """Whether the terminal (or COLUMNS) is narrower than :data:`NARROW`: --help is then plain text, which cuts
    nothing (wrapped at 50 columns at least, click's floor; a hyphenated word may wrap at its hyphen)."""
    return shutil.get_terminal_size().columns < NARROW


def stop_if_interrupted() -> None:
    """A KeyboardInterrupt (exit 130, as any Ctrl-C) where one reached the command before the error being handled:
    a Ctrl-C inside a library's import can come back as any error (:func:`draftsmith.sigint.interrupted`)."""
    from draftsmith.sigint import interrupted

    if interrupted():
        raise KeyboardInterrupt


app = typer.Typer(cls=_Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Speculative-decoding draft models from YAML.")
class _Console(Console):
    def on_broken_pipe(self) -> None:   # rich's own exits 1, a user error's code: end as any closed pipe does
        self.quiet = True
        raise BrokenPipeError(32, "Broken pipe")


out = _Console(width=max(110, Console().width))  # tables stay readable when piped (80 columns by default)
err = _Console(stderr=True)


@app.callback()
def _options(debug: bool = typer.Option(False, "--debug", help="show the full traceback of an unexpected error "
                                                              "(and of draftsmith's own errors)")) -> None:
    """Speculative-decoding draft models from YAML."""
    _asked["debug"] = debug


_asked = {"debug": False}   # the global options of the command running now (set by the callback above)


def debug() -> bool:
    """Whether ``draftsmith --debug`` was given: a command that goes on past an error (validate) raises it then."""
    return _asked["debug"]


def debug_traceback(exc: BaseException) -> None:
    """Under ``--debug``, ``exc``'s traceback on stderr (validate and list say draftsmith's errors and go on)."""
    if debug():
        __import__("traceback").print_exception(exc, file=sys.stderr)


SETTING_OPTIONS = {"max_new_tokens": "--max-new-tokens", "temperature": "--temperature", "seed": "--seed",
                   "top_p": "--top-p", "top_k": "--top-k", "stop": "--stop"}


def given_path(value: str) -> Path:
    """A path option's parser: an empty string is refused (exit 2, naming the option), where typer's own Path type
    reads it as the current folder, which nobody named (an unset shell variable: ``--draft "$DRAFT"``)."""
    if value == "":
        raise typer.BadParameter("an empty string is not a path (./ names the current folder)")
    return Path(value)


def given_paths(spec: str | None, target: str | None, draft: str | Path | None) -> None:
    """The spec file, target and draft folders a command is given (not a spec's or a cached target's name) checked
    before torch is imported (:func:`draftsmith.specs.documents.spec_file`,
    :func:`draftsmith.assembler.folders.given_dirs`): a mistyped path is said at once, not seconds later; so is a
    spec name no plugin provides (the registry knows its specs before it collects the components, which import
    torch)."""
    from draftsmith import hub
    from draftsmith.assembler.folders import given_dirs
    from draftsmith.registry import default_registry
    from draftsmith.specs.documents import spec_file, spec_path

    if spec is not None and spec_file(spec) is None:   # a name: the registry's (its components not collected)
        spec_path(spec, default_registry())
    named = hub.is_named(target) or target == ""   # "": _target's to refuse
    given_dirs(None if named else target, draft)


def threads_text(value: str) -> str:
    """--threads: 'auto' or an integer >= 1, else typer's usage error as for the other counts (the CPU count is
    checked with the other options: parse_threads)."""
    try:
        fine = value == "auto" or int(value) >= 1
    except ValueError:
        fine = False
    if not fine:
        raise typer.BadParameter(f"Input should be auto or an integer greater than or equal to 1, got {short(value)}")
    return value


def setting_problems(max_new_tokens: int, temperature: float = 0.0, seed: int | None = None) -> list[str]:
    """generate()'s own checks of these options (decoding.settings.number_problems, which imports no torch), each
    problem naming the option, so that a command refuses them before anything is loaded. top_p and top_k are no
    options: they are passed at generate()'s defaults, which pass whatever the vocabulary (not known before a model
    is)."""
    from draftsmith.decoding.settings import number_problems

    return number_problems(max_new_tokens, temperature, 1.0, 0, seed, vocab=0, names=SETTING_OPTIONS)


def target_folder_problems(folder: Path, prompt, max_new_tokens: int, names: dict[str, str]) -> list[str]:
    """What the target's folder tells of the prompt and max_new_tokens before anything is loaded, as generate()
    says it once the model is (each problem under its option in ``names``): token ids outside its config's
    vocab_size, a text prompt or a conversation without tokenizer files, a prompt and new tokens past its
    max_position_embeddings (a text prompt is at least one token). Only what config.json states is used (absent,
    transformers' default is taken at the load, which checks it then); a folder draftsmith cannot read gives no
    problems here: the load says what is wrong with it."""
    from draftsmith.assembler.assemble import TOKENIZER_FILES
    from draftsmith.assembler.config import read_config
    from draftsmith.assembler.remote_code import remote_tokenizer_problem
    from draftsmith.chat import is_conversation
    from draftsmith.decoding.prompts import context_problems, encode_prompts

    try:
        config = read_config(folder)
    except (DraftsmithError, OSError):
        return []
    vocab, context = (v if type(v) is int else None for v in map(config.get, ("vocab_size", "max_position_embeddings")))
    problems: list[str] = []
    text = isinstance(prompt, str) or is_conversation(prompt)
    tokenizer = any((folder / f).exists() or (folder / f).is_symlink() for f in TOKENIZER_FILES)   # as the load
    if text and tokenizer and (remote := remote_tokenizer_problem(folder)) is not None:   # its own code: never run
        return [f"{names['prompt']}: a text prompt needs the target's tokenizer, but {remote}"]
    if text and tokenizer:   # its tokens are known once the tokenizer loads
        if context is not None and max_new_tokens > context:
            problems.append(f"{names['max_new_tokens']} is {max_new_tokens}: past the target's context of {context} "
                            f"tokens (max_position_embeddings in {short_text(config.file, 300)}); with a prompt of "
                            f"one token at most {context} new tokens fit, fewer with a longer one")
        return problems
    prompts, _ = encode_prompts(prompt, tokenizer=None, vocab=vocab or sys.maxsize, context=context,
                                problems=problems, names=names, max_new_tokens=max_new_tokens)
    return problems + context_problems(prompts, max_new_tokens, context, names)


def detect_spec(draft: Path, target: Path | None = None, option: str = "--draft"):
    """The spec ``inspect`` proposes for this draft folder (the family a registered detector names, with every value
    inspect resolved from the folder: EAGLE-3 flags, the d2t convention, the rope order, FP8 scales), printed with
    the detector's reason; exit 2 when none recognises it, with assemble's note when the draft folder holds a
    target or the ``target`` folder a draft (the two folders given the wrong way round)."""
    from draftsmith.assembler.explain import folder_swap_note
    from draftsmith.convert.inspect import inspect_checkpoint, render_unknown
    from draftsmith.specs.loader import parse_spec

    found = inspect_checkpoint(draft)
    if found.match is None:   # inspect's account (the closest families and what did not fit), then the swap note
        first, *closest = render_unknown(found, whole_model=False).splitlines()   # the swap note below says it
        note = (folder_swap_note(draft, "draft", names=list(found.infos))
                or (folder_swap_note(target, "target") if target is not None else None))
        err.print(escape("\n".join([f"error: {option} {first}; pass --spec", *closest, *([note] if note else [])])),
                  soft_wrap=True)   # each line whole, as assemble's notes
        raise typer.Exit(2)
    by = f" by plugin {found.match.by_plugin!r}" if found.match.by_plugin else ""   # as inspect says
    out.print(f"spec {escape(found.match.spec)} (detected{escape(by)}: {escape(found.match.reason)})")
    return parse_spec(found.spec, source=f"the spec inspect proposes for {short_text(draft, 300)}")


def typed(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not left at its default)."""
    return getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"   # typer may vendor its click
