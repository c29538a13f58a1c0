"""What the CLI prints and which exit code it ends with.

Every command renders its result in one of two ways: lines for a person (the default) or one JSON document
on stdout (``--json``) for scripts. Expected failures (a timeout, an unroutable address, a remote error,
no broker) end the command with a one-line message on stderr and an exit code from :class:`ExitCode`; only a
bug in Gear itself shows a traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from enum import IntEnum
from types import MappingProxyType
from typing import Any, NoReturn

import typer
from pydantic import BaseModel, ValidationError

from gear import (
    BadPayloadError,
    CallTimeoutError,
    ConfigurationError,
    ConnectError,
    ConnectionLostError,
    DeliveryError,
    GearError,
    MethodNotFoundError,
    RemoteError,
    Settings,
    mask_secrets,
    mask_url,
)

__all__ = (
    "EXIT_CODES_HELP",
    "ExitCode",
    "configure_logging",
    "Renderer",
    "error_document",
    "exit_code_for",
    "fail",
    "jsonable",
    "map_errors",
    "masked_url",
)


class ExitCode(IntEnum):
    """The process exit codes of every ``gear`` command."""

    OK = 0
    INTERNAL = 1
    USAGE = 2
    CONNECT = 3
    TIMEOUT = 4
    UNROUTABLE = 5
    REMOTE = 6
    METHOD_NOT_FOUND = 7
    BAD_PAYLOAD = 8
    MISSING_DEPENDENCY = 9
    CHECK_FAILED = 10
    BREAKING = 11
    INTERRUPTED = 130


_MEANING: Mapping[ExitCode, str] = MappingProxyType(
    {
        ExitCode.OK: "success",
        ExitCode.INTERNAL: "unexpected error (a bug: please report it with the traceback)",
        ExitCode.USAGE: "bad usage or input: unknown option, invalid address, TYPE, HOST or JSON",
        ExitCode.CONNECT: "cannot connect to the broker, or the connection was lost",
        ExitCode.TIMEOUT: "no reply before the deadline (gather, nodes: someone did not answer)",
        ExitCode.UNROUTABLE: "unroutable: no queue bound for the address (no such instance) or a nack",
        ExitCode.REMOTE: "the remote handler raised an error",
        ExitCode.METHOD_NOT_FOUND: "the remote instance has no handler for that method",
        ExitCode.BAD_PAYLOAD: "the remote handler rejected the payload (validation failed)",
        ExitCode.MISSING_DEPENDENCY: "an optional dependency is missing (pyspark for `gear traces`)",
        ExitCode.CHECK_FAILED: "`gear doctor` found something that must change (it says what)",
        ExitCode.BREAKING: "`gear contract diff` found a breaking change",
        ExitCode.INTERRUPTED: "interrupted (Ctrl-C or SIGTERM before the command finished)",
    }
)

EXIT_CODES_HELP = "\b\nExit codes:\n" + "\n".join(
    f"  {int(code):>3}  {meaning}" for code, meaning in _MEANING.items()
)
"""The exit-code table as ``gear --help`` shows it (``\\b`` tells click not to rewrap it)."""

# Most specific class first: the first isinstance match wins.
_BY_ERROR: tuple[tuple[type[BaseException], ExitCode], ...] = (
    (MethodNotFoundError, ExitCode.METHOD_NOT_FOUND),
    (BadPayloadError, ExitCode.BAD_PAYLOAD),
    (RemoteError, ExitCode.REMOTE),
    (CallTimeoutError, ExitCode.TIMEOUT),
    (DeliveryError, ExitCode.UNROUTABLE),
    (ConnectError, ExitCode.CONNECT),
    (ConnectionLostError, ExitCode.CONNECT),
    (ConfigurationError, ExitCode.USAGE),
    (ValueError, ExitCode.USAGE),
    # The SDK wraps socket errors in ConnectError; these are a safety net, not the contract.
    (ConnectionError, ExitCode.CONNECT),
    (TimeoutError, ExitCode.TIMEOUT),
    (OSError, ExitCode.CONNECT),
)


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code an exception ends the command with; ``INTERNAL`` for anything unexpected."""
    for cls, code in _BY_ERROR:
        if isinstance(exc, cls):
            return code
    return ExitCode.INTERNAL


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):  # settings read by the service's module (gear.Settings())
        return Settings.explain(exc)
    text = mask_secrets(" ".join(str(exc).split())) or type(exc).__name__
    if isinstance(exc, RemoteError):  # a BadPayloadError's text names the fields that failed
        return f"remote error: {text}"
    if isinstance(exc, GearError):
        return text
    return f"{type(exc).__name__}: {text}"


def jsonable(value: Any) -> Any:
    """``value`` made JSON-able: pydantic models dumped, dataclasses and tuples turned into plain data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {name: jsonable(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


class Renderer:
    """Prints results for a person or, with ``as_json``, as one JSON document per command."""

    def __init__(self, as_json: bool = False) -> None:
        self.as_json = as_json

    def line(self, text: str = "") -> None:
        """A line for a person; ignored in JSON mode so stdout stays one parseable document."""
        if not self.as_json:
            typer.echo(text)

    def document(self, data: Any) -> None:
        """The command's JSON result (JSON mode only)."""
        if self.as_json:
            typer.echo(json.dumps(jsonable(data), indent=2, sort_keys=True))

    def value(self, data: Any) -> str:
        """A result value formatted for a person: a string as is, anything else as compact JSON."""
        if isinstance(data, str):
            return data
        return json.dumps(jsonable(data), sort_keys=True, ensure_ascii=False)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """A plain-text table with aligned columns (human mode only)."""
        if self.as_json:
            return
        widths = [len(h) for h in headers]
        for row in rows:
            widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        typer.echo(fmt.format(*headers).rstrip())
        typer.echo(fmt.format(*("-" * w for w in widths)).rstrip())
        for row in rows:
            typer.echo(fmt.format(*row).rstrip())


def error_document(kind: str, message: str, code: ExitCode, **more: Any) -> dict[str, Any]:
    """The JSON document of a failed command: ``{"ok": false, "error": {"type", "message", "exit_code"}}``."""
    return {"ok": False, "error": {"type": kind, "message": message, "exit_code": int(code), **more}}


def fail(message: str, code: ExitCode, renderer: Renderer | None = None, kind: str = "Error") -> NoReturn:
    """End the command with a one-line message on stderr, or with ``--json`` the JSON error document on
    stdout instead (``kind`` is its ``type``)."""
    message = mask_secrets(message)
    if renderer is not None and renderer.as_json:
        renderer.document(error_document(kind, message, code))
    else:
        typer.echo(f"gear: {message}", err=True)
    raise typer.Exit(int(code))


@contextlib.contextmanager
def map_errors(renderer: Renderer | None = None) -> Iterator[None]:
    """Turn expected failures into a one-line message and their exit code; let bugs raise."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        typer.echo("gear: interrupted", err=True)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except BrokenPipeError:
        # stdout went away (`gear demo | head`): stop quietly, and keep Python from complaining at exit.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(int(ExitCode.OK)) from None
    except Exception as exc:
        code = exit_code_for(exc)
        if code is ExitCode.INTERNAL:
            raise
        if renderer is not None and renderer.as_json:
            more: dict[str, Any] = {}
            if isinstance(exc, RemoteError):
                more.update(remote_type=exc.type, details=jsonable(exc.details))
            renderer.document(error_document(type(exc).__name__, _one_line(exc), code, **more))
        else:
            typer.echo(f"gear: {_one_line(exc)}", err=True)
        raise typer.Exit(int(code)) from None


def masked_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, for printing (:func:`gear.base.redact.mask_url`)."""
    return mask_url(url)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the record (test runners swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: int) -> None:
    """Send log records to stderr at ``level`` and above, unless the host process set up logging itself.

    Commands that end with one line of their own (call, cast, ...) pass ``logging.CRITICAL``, so that
    retry warnings during a failed connect do not bury the message; ``-v`` lowers it.
    """
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h, _StderrHandler)]
    if root.handlers and not ours:
        return  # embedded (e.g. under pytest): logging belongs to the host
    for handler in ours:
        root.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
