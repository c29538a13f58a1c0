"""Running the user's code for ``gear serve`` and ``gear contract export``: importing ``module:attr``
and calling a factory that builds a service.

What fails in there is the user's bug, not Gear's: a ``SyntaxError``, an exception at import or in the
factory ends the command with one line that says what raised and where (file and line), exit code 2,
instead of a traceback under "a bug: please report it".
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import gear

__all__ = ("TargetError", "UserCodeError", "build_service", "load_target", "where")

_GEAR = str(Path(gear.__file__).resolve().parent)
_LIBRARIES = tuple(
    str(Path(sysconfig.get_paths()[name]).resolve())
    for name in ("stdlib", "platstdlib", "purelib", "platlib")
)


class TargetError(ValueError):
    """``MODULE:ATTR`` names nothing usable: no such module or attribute, or not a service."""


class UserCodeError(TargetError):
    """The user's module or factory raised; the message names the exception and where it was raised."""

    def __init__(self, action: str, exc: BaseException) -> None:
        if isinstance(exc, ValidationError):  # gear.Settings() at import: name the setting, no jargon
            text = gear.Settings.explain(exc)
        else:
            text = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
        found = where(exc)
        at = f" ({found})" if found else ""
        super().__init__(f"{action} raised {type(exc).__name__}: {' '.join(text.split())}{at}")


def where(exc: BaseException) -> str:
    """``file, line N`` where ``exc`` was raised in the user's code: the innermost frame outside Gear,
    the import machinery and installed libraries (else the innermost one outside Gear); a path under
    the working directory is shown relative to it. ``""`` if unknown."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{_shown(exc.filename)}, line {exc.lineno}"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<") and not _under(frame.filename, (_GEAR,))
    ]
    own = [frame for frame in frames if not _under(frame.filename, _LIBRARIES)]
    found = (own or frames)[-1:]
    return f"{_shown(found[0].filename)}, line {found[0].lineno}" if found else ""


def _under(filename: str, folders: tuple[str, ...]) -> bool:
    return str(Path(filename).resolve()).startswith(folders)


def _shown(filename: str) -> str:
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return filename


def load_target(target: str) -> Any:
    """Import ``module:attr`` and return what it names (``attr`` may be dotted).

    Raises:
        TargetError: ``target`` is not ``module:attr``, the module does not exist or lacks ``attr``.
        UserCodeError: importing the module raised (a ``SyntaxError``, a missing dependency, anything).
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise TargetError(f"expected module:attr (e.g. gear.examples.repo:create_service), got {target!r}")
    # Like `python -m`, let a module in the current directory be found.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{module_name}.".startswith(f"{exc.name}."):  # the module itself
            raise TargetError(f"cannot import {module_name!r}: {exc}") from None
        raise UserCodeError(f"importing {module_name!r}", exc) from exc
    except Exception as exc:
        raise UserCodeError(f"importing {module_name!r}", exc) from exc
    try:
        found = module
        for part in attr.split("."):
            found = getattr(found, part)
    except AttributeError:
        raise TargetError(f"module {module_name!r} has no attribute {attr!r}") from None
    return found


async def build_service(found: Any, target: str) -> gear.Service:
    """``found`` if it is a service, else what calling it builds (awaited if it is a coroutine).

    Raises:
        TargetError: ``found`` is a class or not callable, or it returned something else.
        UserCodeError: the factory raised (Gear's own errors, e.g. a bad setting, pass as they are).
    """
    if isinstance(found, gear.Service):
        return found
    if inspect.isclass(found):
        raise TargetError(f"{target} is a class, not a gear.Service or a function that builds one")
    if not callable(found):
        raise TargetError(
            f"{target} is a {type(found).__name__}, not a gear.Service or a callable that builds one"
        )
    try:
        built = found()
        if inspect.isawaitable(built):
            built = await built
    except (gear.GearError, ValidationError):
        raise  # Gear's own words (a bad TYPE, a setting and its variable) say it better
    except Exception as exc:
        raise UserCodeError(f"calling {target}", exc) from exc
    if isinstance(built, gear.Service):
        return built
    raise TargetError(f"calling {target} returned {type(built).__name__}, not a gear.Service")
