"""MkDocs hooks: the reference pages' generated parts, made from the code at every build.

``mkdocs.yml`` names this file under ``hooks:``. A page asks for a generated part with a line that holds
only a marker comment; the build replaces that line with the Markdown, so the site can never disagree
with the code:

* ``<!-- gen:cli -->``: every ``gear`` command with its ``--help`` text, walked from the typer app;
* ``<!-- gen:settings -->``: every :class:`gear.Settings` field, its ``GEAR_*`` variable, type,
  default and the attribute docstring below it in ``gear/settings.py``;
* ``<!-- gen:cli-env -->``: the environment variables the CLI's options read (``gear broker``'s own);
* ``<!-- gen:exit-codes -->``: the exit-code table of ``gear --help``;
* ``<!-- gen:exceptions -->``: every exception of ``gear.errors``, its bases and its CLI exit code;
* ``<!-- gen:exception-tree -->``: the tree drawn in ``gear.errors``' docstring.

``python scripts/docs_hooks.py NAME`` prints one part (``cli``, ``settings``...), to look at it
without building the site.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ("GENERATORS", "on_page_content", "on_page_markdown", "render")

ROOT = Path(__file__).resolve().parents[1]
_MARKER = re.compile(r"^<!-- gen:(?P<name>[\w-]+) -->$", re.M)
_WIDTH = 100  # the terminal width the CLI's help is rendered at


def _command(path: tuple[str, ...]) -> Any:
    """The click command object (typer's) for ``gear`` followed by ``path``."""
    import typer.main

    from gear.cli.main import app

    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.get_command(None, name)
    return command


def _subcommands(command: Any) -> list[str]:
    listing = getattr(command, "list_commands", None)
    return list(listing(None)) if listing else []


def _help(path: tuple[str, ...]) -> str:
    """What ``gear PATH --help`` prints, at a fixed width."""
    from typer.testing import CliRunner

    from gear.cli.main import app

    result = CliRunner().invoke(
        app, [*path, "--help"], terminal_width=_WIDTH, env={"COLUMNS": str(_WIDTH), "NO_COLOR": "1"}
    )
    if result.exit_code != 0:
        raise RuntimeError(f"gear {' '.join(path)} --help exited {result.exit_code}: {result.output}")
    return result.output.rstrip()


def _walk(path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name in _subcommands(_command(path)):
        yield from _walk((*path, name))


def cli() -> str:
    """Every command, depth first, as a heading, its summary and its help text."""
    parts = []
    for path in _walk():
        command = _command(path)
        name = " ".join(("gear", *path))
        level = "#" * min(2 + len(path), 4)
        summary = (command.help or "").strip().split("\n\n")[0].replace("\n", " ").replace("\b", "")
        summary = re.sub(r"([*_`\[\]<>])", r"\\\1", summary)
        parts.append(f"{level} `{name}`\n\n{summary}\n\n```text\n$ {name} --help\n{_help(path)}\n```\n")
    return "\n".join(parts)


def _attribute_docs(cls: type) -> dict[str, str]:
    """Each annotated attribute's docstring (the string literal right below it) in ``cls``'s source."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation)
    text = re.sub(r"typing\.|typing_extensions\.|pydantic_settings\.sources\.types\.", "", text)
    return re.sub(r"Annotated\[(.*), NoDecode\]", r"\1", text)


def settings() -> str:
    """The Settings fields as a table."""
    from pydantic_core import PydanticUndefined

    from gear.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    docs = _attribute_docs(Settings)
    rows = ["| variable (field) | type | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:
            default = "computed"
        elif field.default is PydanticUndefined:
            default = "required"
        elif isinstance(field.default, tuple):
            default = f"`{','.join(field.default)}`"
        else:
            default = f"`{field.default!r}`"
        if name not in docs:
            raise RuntimeError(f"Settings.{name} has no docstring: write one below it in gear/settings.py")
        kinds = " \\| ".join(f"`{part.strip()}`" for part in _type_name(field.annotation).split("|"))
        rows.append(
            f"| `{prefix}{name.upper()}`<br>(`{name}`) | {kinds} | {_cell(default)} | {_cell(docs[name])} |"
        )
    return "\n".join(rows) + "\n"


def cli_env() -> str:
    """The environment variables read by CLI options that are not Settings fields."""
    from gear.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    known = {f"{prefix}{name.upper()}" for name in Settings.model_fields}
    seen: dict[str, tuple[list[str], str]] = {}
    for path in _walk():
        for param in getattr(_command(path), "params", []):
            envvars = param.envvar if isinstance(param.envvar, list | tuple) else [param.envvar]
            for var in envvars:
                if var and var not in known:
                    option = max(param.opts, key=len)
                    commands, _ = seen.setdefault(var, ([], _cell(getattr(param, "help", "") or "")))
                    commands.append(f"`{' '.join(('gear', *path))} {option}`")
    rows = ["| variable | option | meaning |", "|---|---|---|"]
    rows += [f"| `{var}` | {', '.join(cmds)} | {text} |" for var, (cmds, text) in sorted(seen.items())]
    return "\n".join(rows) + "\n"


def exit_codes() -> str:
    """The exit-code table ``gear --help`` prints, as Markdown."""
    from gear.cli.output import EXIT_CODES_HELP, ExitCode

    rows = ["| code | name | meaning |", "|---:|---|---|"]
    for line in EXIT_CODES_HELP.splitlines():
        match = re.match(r"^\s+(\d+)\s+(.*)$", line)
        if match:
            code = int(match.group(1))
            rows.append(f"| {code} | `{ExitCode(code).name}` | {_cell(match.group(2))} |")
    return "\n".join(rows) + "\n"


def exceptions() -> str:
    """Every exception class of ``gear.errors`` with its bases, meaning and exit code."""
    import gear.errors
    from gear.cli.output import exit_code_for

    classes = []
    for name in gear.errors.__all__:
        value = getattr(gear.errors, name)
        if isinstance(value, type) and issubclass(value, BaseException) and value.__name__ == name:
            classes.append(value)
    rows = ["| exception | is also a | meaning | CLI exit code |", "|---|---|---|---:|"]
    for cls in classes:
        bases = [b.__name__ for b in cls.__mro__[1:] if b.__module__ == "builtins" and b not in (
            Exception, BaseException, object)]  # fmt: skip
        parents = [b.__name__ for b in cls.__bases__ if b.__module__ == "gear.errors"]
        also = ", ".join(f"`{n}`" for n in parents + bases) or "`Exception`"
        meaning = (inspect.getdoc(cls) or "").split("\n\n")[0]
        code = exit_code_for(cls.__new__(cls))
        rows.append(f"| [`{cls.__name__}`][gear.errors.{cls.__name__}] | {also} | {_cell(meaning)} "
                    f"| {int(code)} |")  # fmt: skip
    return "\n".join(rows) + "\n"


def exception_tree() -> str:
    """The ``::`` block of ``gear.errors``' docstring, as a text block."""
    import gear.errors

    doc = inspect.getdoc(gear.errors) or ""
    tree = doc.split("::", 1)[1].split("\n\n")[1]
    return f"```text\n{textwrap.dedent(tree).replace('``', '')}\n```\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "exception-tree": exception_tree,
    "cli": cli,
    "settings": settings,
    "cli-env": cli_env,
    "exit-codes": exit_codes,
    "exceptions": exceptions,
}


def render(markdown: str) -> str:
    """``markdown`` with every marker line replaced by its generated part.

    Raises:
        KeyError: a marker names no generator.
    """
    return _MARKER.sub(lambda m: GENERATORS[m.group("name")]().rstrip("\n"), markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: fill the page's markers."""
    return render(markdown)


_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):<code>(~?)([^<]*)</code>")


def _role(match: re.Match[str]) -> str:
    name = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
    return f"<code>{name}</code>"


def on_page_content(html: str, **_: Any) -> str:
    """MkDocs' hook: the docstrings' Sphinx roles (``:class:`Settings```) as plain code, and their
    ``::`` before a literal block (already a code block in Markdown) as one colon."""
    return _ROLE.sub(_role, html).replace("::</p>", ":</p>")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(GENERATORS[sys.argv[1]]())
