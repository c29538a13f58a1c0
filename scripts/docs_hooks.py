"""The reference pages' generated parts, made from the code: written into the pages (so they read on
GitHub too) and refreshed at every site build.

A page holds a generated part between two marker comments; ``python scripts/docs_hooks.py --write``
replaces what lies between them with what the code says now, ``tests/docs/test_generated_blocks.py``
fails while a page is stale, and ``mkdocs.yml``'s ``hooks:`` refreshes them at build time, so the site
can never disagree with the code:

* ``<!-- gen:cli -->``: every ``gear`` command with its ``--help`` text, walked from the typer app,
  at 80 columns;
* ``<!-- gen:settings -->``: every :class:`gear.Settings` field, its ``GEAR_*`` variable, type,
  default, range and the attribute docstring below it in ``gear/settings.py``;
* ``<!-- gen:cli-env -->``: the environment variables the CLI's options read (``gear broker``'s own);
* ``<!-- gen:exit-codes -->``: the exit-code table of ``gear --help``;
* ``<!-- gen:exceptions -->``: every exception of ``gear.errors``, its bases and its CLI exit code
  (linked to the API page on the site);
* ``<!-- gen:exception-tree -->``: the tree drawn in ``gear.errors``' docstring;
* ``<!-- gen:metrics -->``: every instrument of ``gear.metrics.names`` with its Prometheus series;
* ``<!-- gen:api-index -->``, ``<!-- gen:broker-api-index -->``: every public name of ``gear`` and
  ``gear.broker``, what it is and its source file (the ``:::`` lines are placeholders on GitHub).

Each part ends with ``<!-- /gen:NAME -->``. ``python scripts/docs_hooks.py NAME`` prints one part.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = (
    "GENERATORS",
    "PAGES",
    "on_page_content",
    "on_page_markdown",
    "on_post_template",
    "render",
    "stale",
    "write",
)

ROOT = Path(__file__).resolve().parents[1]
PAGES = tuple(sorted((ROOT / "docs").rglob("*.md")))
"""The pages that may hold generated parts."""
_BLOCK = re.compile(r"^<!-- gen:(?P<name>[\w-]+) -->\n(?P<body>.*?)^<!-- /gen:(?P=name) -->$", re.M | re.S)
_OPEN = re.compile(r"^<!-- gen:(?P<name>[\w-]+) -->$", re.M)
_WIDTH = 80  # the terminal width the CLI's help is rendered at: a code block's width on the site


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


def _bounds(metadata: list[Any]) -> str:
    """A field's range as ``0 < x ≤ 86400`` from its pydantic constraints; ``""`` without any."""

    def number(value: float) -> str:
        return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"

    low = high = ""
    for item in metadata:
        kind = type(item).__name__
        if kind in ("Gt", "Ge"):
            low = f"{number(item.gt if kind == 'Gt' else item.ge)} {'<' if kind == 'Gt' else '≤'} "
        elif kind in ("Lt", "Le"):
            high = f" {'<' if kind == 'Lt' else '≤'} {number(item.lt if kind == 'Lt' else item.le)}"
    return f"{low}x{high}" if low or high else ""


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
        bounds = _bounds(field.metadata)
        if bounds:
            kinds += f"<br>{bounds}"
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


def exceptions(site: bool = False) -> str:
    """Every exception class of ``gear.errors`` with its bases, meaning and exit code (on the site, each
    name links to its entry in the Python API page)."""
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
        name = f"[`{cls.__name__}`][gear.errors.{cls.__name__}]" if site else f"`{cls.__name__}`"
        rows.append(f"| {name} | {also} | {_cell(meaning)} | {int(code)} |")
    return "\n".join(rows) + "\n"


def exception_tree() -> str:
    """The ``::`` block of ``gear.errors``' docstring, as a text block."""
    import gear.errors

    doc = inspect.getdoc(gear.errors) or ""
    tree = doc.split("::", 1)[1].split("\n\n")[1]
    return f"```text\n{textwrap.dedent(tree).replace('``', '')}\n```\n"


def _summary(obj: Any) -> str:
    """The first sentence of ``obj``'s docstring, for a table cell (Sphinx roles as plain code)."""
    doc = inspect.getdoc(obj) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    first = re.split(r"(?<=\.)\s", first)[0]
    first = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", first)
    first = re.sub(r"``([^`]+)``", r"`\1`", first)
    return _cell(first[:-1] + "." if first.endswith(":") else first)


def _api_index(module_name: str, names: list[str]) -> str:
    """One row per public name of ``module_name``: what it is and the file its source is in."""
    module = importlib.import_module(module_name)
    rows = ["| name | what it is | source |", "|---|---|---|"]
    for name in names:
        obj = getattr(module, name)
        try:
            where = Path(inspect.getsourcefile(inspect.unwrap(obj)) or "").resolve()
        except TypeError:  # a constant: its module holds it
            where = Path(inspect.getsourcefile(module) or "").resolve()
        source = f"`{where.relative_to(ROOT).as_posix()}`" if where.is_relative_to(ROOT) else ""
        rows.append(f"| `{module_name}.{name}` | {_summary(obj)} | {source} |")
    return "\n".join(rows) + "\n"


def api_index() -> str:
    """Every name of ``gear.__all__``: a table that reads on GitHub too, where the ``:::`` lines of the
    page are only placeholders for the site."""
    import gear

    return _api_index("gear", list(gear.__all__))


def broker_api_index() -> str:
    """Every name of ``gear.broker.__all__``, as :func:`api_index`."""
    import gear.broker

    return _api_index("gear.broker", list(gear.broker.__all__))


def metrics() -> str:
    """Every instrument of ``gear.metrics.names``: measured on the hot path, then read when scraped."""
    from gear.metrics.names import READ, Instrument, Measured

    measured = [v for v in vars(Measured).values() if isinstance(v, Instrument)]
    rows = [
        "| OpenTelemetry name | Prometheus series | kind | labels | what it counts |",
        "|---|---|---|---|---|",
    ]
    for instrument in [*measured, *READ.values()]:
        labels = ", ".join(f"`{label.prometheus}`" for label in instrument.labels) or "-"
        rows.append(
            f"| `{instrument.name}` | `{instrument.prometheus}` | {instrument.kind.value} | {labels} "
            f"| {_cell(instrument.description)} |"
        )
    return "\n".join(rows) + "\n"


GENERATORS: dict[str, Callable[..., str]] = {
    "metrics": metrics,
    "api-index": api_index,
    "broker-api-index": broker_api_index,
    "exception-tree": exception_tree,
    "cli": cli,
    "settings": settings,
    "cli-env": cli_env,
    "exit-codes": exit_codes,
    "exceptions": exceptions,
}


def _generate(name: str, site: bool) -> str:
    """The part ``name`` as Markdown (ending with one newline).

    Raises:
        KeyError: no generator has that name.
    """
    make = GENERATORS[name]
    text = make(site=site) if "site" in inspect.signature(make).parameters else make()
    return text.rstrip("\n") + "\n"


def render(markdown: str, *, site: bool = True) -> str:
    """``markdown`` with every generated part made afresh (``site``: the flavour for the built site).

    Raises:
        KeyError: a marker names no generator.
        ValueError: a part without its end marker.
    """
    opened = [m.group("name") for m in _OPEN.finditer(markdown)]
    closed = [m.group("name") for m in _BLOCK.finditer(markdown)]
    if opened != closed:
        missing = sorted(set(opened) - set(closed)) or opened
        raise ValueError(f"generated part(s) {', '.join(missing)} without <!-- /gen:NAME --> after them")
    return _BLOCK.sub(
        lambda m: f"<!-- gen:{m['name']} -->\n{_generate(m['name'], site)}<!-- /gen:{m['name']} -->",
        markdown,
    )


def stale(pages: tuple[Path, ...] = PAGES) -> list[str]:
    """The pages (relative to the repository) whose generated parts differ from what the code says."""
    return [
        str(page.relative_to(ROOT))
        for page in pages
        if (text := page.read_text()) != render(text, site=False)
    ]


def write(pages: tuple[Path, ...] = PAGES) -> list[str]:
    """Refresh every page's generated parts in place; returns the pages that changed."""
    changed = stale(pages)
    for name in changed:
        page = ROOT / name
        page.write_text(render(page.read_text(), site=False))
    return changed


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: the page's generated parts, made afresh for the site."""
    return render(markdown, site=True)


_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):<code>(~?)([^<]*)</code>")


def _role(match: re.Match[str]) -> str:
    name = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
    return f"<code>{name}</code>"


def on_page_content(html: str, **_: Any) -> str:
    """MkDocs' hook: the docstrings' Sphinx roles (``:class:`Settings```) as plain code, and their
    ``::`` before a literal block (already a code block in Markdown) as one colon."""
    return _ROLE.sub(_role, html).replace("::</p>", ":</p>")


_ROOTED = re.compile(r'(?P<attr>\b(?:href|src|action)=")/(?P<rest>[^/"][^"]*|)"')


def on_post_template(output: str, *, template_name: str, **_: Any) -> str:
    """MkDocs' hook: ``404.html`` with links relative to the site's root folder, as every other page
    has them, instead of root-absolute ones (``/assets/...``), which break wherever the site is not
    served at a domain's root (a ``file://`` folder, a sub-path). It sits in the root folder, so
    ``assets/...`` is right there."""
    if template_name != "404.html":
        return output
    output = _ROOTED.sub(lambda m: f'{m["attr"]}{m["rest"] or "index.html"}"', output)
    return re.sub(r'"base":\s*"/"', '"base": "."', output)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:] == ["--write"]:
        for changed in write():
            print(f"wrote {changed}")
    elif sys.argv[1:] == ["--check"]:
        found = stale()
        print("\n".join(f"stale: {page}" for page in found) or "every generated part is fresh")
        sys.exit(1 if found else 0)
    else:
        print(_generate(sys.argv[1], site=False), end="")
