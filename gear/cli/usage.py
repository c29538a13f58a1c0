"""Usage errors in Gear's words: a bad option value, a missing argument or an unknown option ends the
command with one ``gear:`` line on stderr and exit code 2 (and, with ``--json``, the JSON error document
on stdout instead), like every other failure, rather than click's three-line usage block.

The root command's class, :class:`GearGroup`, catches them where click would print its block: once, for
every command and subcommand.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from gear.cli.output import ExitCode, Renderer, error_document

__all__ = ("GearGroup", "usage_line")

_HINT = re.compile(r"'(--[\w-]+)'(?: / '(-\w)')?")


def usage_line(exc: typer.TyperException) -> str:
    """One line for a usage error: what was wrong, and for anything but a bad value where help is."""
    text = " ".join(exc.format_message().split())
    text = _HINT.sub(lambda m: m[1] + (f" ({m[2]})" if m[2] else ""), text)  # '--timeout' / '-t'
    text = text[:1].lower() + text[1:]
    ctx = getattr(exc, "ctx", None)
    bad_value = isinstance(exc, typer.BadParameter) and exc.message
    if ctx is not None and not bad_value:
        text = f"{text.rstrip('.')} (see '{ctx.command_path} --help')"
    return text


def _is_help(exc: typer.TyperException) -> bool:
    """True for click's "no arguments: show the help" signal, which carries the help as its message."""
    ctx = getattr(exc, "ctx", None)
    return ctx is not None and exc.message == ctx.get_help()


def _wants_json(argv: Sequence[str]) -> bool:
    words = list(argv)
    return "--json" in (words[: words.index("--")] if "--" in words else words)


class GearGroup(TyperGroup):
    """The ``gear`` command group: runs a command and reports usage errors as Gear's one line."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line ``args`` (default: ``sys.argv[1:]``) and exit with its code."""
        argv = list(sys.argv[1:] if args is None else args)
        try:
            result = super().main(
                argv,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except typer.Abort:
            typer.echo("gear: aborted", err=True)
            code = int(ExitCode.INTERRUPTED)
        except typer.TyperException as exc:
            if _is_help(exc):
                typer.echo(exc.message, err=True)
                code = int(ExitCode.USAGE)
            else:
                code = _report(exc, Renderer(_wants_json(argv)))
        else:
            code = result if isinstance(result, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def _report(exc: typer.TyperException, out: Renderer) -> int:
    line = usage_line(exc)
    if out.as_json:
        out.document(error_document("UsageError", line, ExitCode.USAGE))
    else:
        typer.echo(f"gear: {line}", err=True)
    return int(ExitCode.USAGE)
