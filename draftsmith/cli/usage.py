"""Words added to a usage error: an option a command takes as an argument (``doctor --target T``, as generate takes
it; ``inspect --draft D``) is told the command's own form."""
from __future__ import annotations


def argument_hint(error: BaseException) -> str:
    """'\\n  doctor takes the target folder as an argument: draftsmith doctor [OPTIONS] [target] [draft]' for
    an unknown option named as one of the command's arguments (by its name or its help's first word), else ''. Never
    raises: the usage error is said either way."""
    try:
        return _hint(error)
    except Exception:  # noqa: BLE001 (click's internals differ between versions: the hint is a nicety)
        return ""


def _hint(error: BaseException) -> str:
    name, ctx = getattr(error, "option_name", None), getattr(error, "ctx", None)
    command = getattr(ctx, "command", None)
    if not isinstance(name, str) or command is None:
        return ""
    wanted = name.lstrip("-").replace("-", "_")

    def named(p) -> bool:   # by its name, or by its help's first word ('draft checkpoint folder')
        return p.name == wanted or (getattr(p, "help", None) or "").split(" ", 1)[0] == wanted

    found = [p for p in command.params if getattr(p, "param_type_name", "") == "argument" and named(p)]
    if not found:
        return ""
    return (f"\n  {command.name} takes the {wanted} folder as an argument: {ctx.command_path} "
            f"{' '.join(command.collect_usage_pieces(ctx))}")
