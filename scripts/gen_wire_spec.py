"""Write gear/wire/spec.py, AMQP 0-9-1's method and property tables, from pamqp's spec data.

pamqp (a test dependency) carries the protocol's definitions (class and method ids, argument names and
types, which methods are synchronous and what answers them); Gear's codec reads them from the generated
module, so pamqp is not needed at run time. tests/wire/test_spec.py checks that the file is fresh.

Usage: python scripts/gen_wire_spec.py [--check]
"""

from __future__ import annotations

import argparse
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

from pamqp import commands

TARGET = Path(__file__).resolve().parent.parent / "gear" / "wire" / "spec.py"
_CLASSES = ("Connection", "Channel", "Exchange", "Queue", "Basic", "Confirm", "Tx")
_PYTHON = {
    "octet": "int",
    "short": "int",
    "long": "int",
    "longlong": "int",
    "bit": "bool",
    "shortstr": "str",
    "longstr": "str | bytes",
    "table": "FieldTable",
}
_ZERO = {"int": "0", "bool": "False", "str": '""', "str | bytes": '""'}

_HEAD = '''"""AMQP 0-9-1 methods and basic properties as Gear's values (generated: do not edit).

Written by ``scripts/gen_wire_spec.py`` from pamqp's spec data: one slotted dataclass per method,
named as the spec names it (``Basic.Publish``), with its arguments in wire order. Each carries its
``index`` (class id << 16 | method id), its ``name``, its argument ``layout`` (attribute, AMQP type)
and, for a synchronous method, the ``responses`` that answer it; a synchronous method is a
``Sync[Reply]``, so a call of it returns its reply typed. :mod:`gear.wire.methods` encodes and decodes
them; :data:`PROPERTIES` is the basic content properties' flag table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Generic, TypeVar

__all__ = ({names})

FieldTable = dict[str, Any]
Reply = TypeVar("Reply", covariant=True)


class Method:
    """One AMQP method's arguments (a generated dataclass per method)."""

    __slots__ = ()
    index: ClassVar[int]
    """``class_id << 16 | method_id``."""
    name: ClassVar[str]
    """``Class.Method``, as the spec names it."""
    responses: ClassVar[tuple[int, ...]]
    """The indexes of the methods that answer it (empty: an asynchronous method)."""
    layout: ClassVar[tuple[tuple[str, str], ...]]
    """``(attribute, AMQP type)`` of each argument, in wire order."""


class Sync(Method, Generic[Reply]):
    """A synchronous method, answered by a ``Reply`` (what a client's call of it returns, typed)."""

    __slots__ = ()
'''


def _default(method: Any, slot: str, python: str) -> str:
    value = inspect.signature(method).parameters[slot].default
    if python == "FieldTable":
        return "field(default_factory=dict)"
    if value is None or value is inspect.Parameter.empty:
        return _ZERO[python]
    return repr(value).replace("'", '"')


def _methods(cls_name: str) -> list[Any]:
    namespace = getattr(commands, cls_name)
    found = [
        value
        for name, value in vars(namespace).items()
        if isinstance(value, type) and hasattr(value, "index") and name != "Properties"
    ]
    return sorted(found, key=lambda method: method.index)


def render() -> str:
    """The module's text, formatted with ruff."""
    by_name = {method.name: method for cls_name in _CLASSES for method in _methods(cls_name)}
    out: list[str] = []
    names = ['"FieldTable"', '"INDEX"', '"Method"', '"PROPERTIES"', '"Reply"', '"Sync"']
    names += [f'"{c}"' for c in _CLASSES]
    out.append(_HEAD.replace("{names}", ", ".join(sorted(names))))
    for cls_name in _CLASSES:
        methods = _methods(cls_name)
        class_id = methods[0].index >> 16
        doc = f"Class {class_id}: the ``{cls_name.lower()}`` methods."
        out.append(f'\n\nclass {cls_name}:\n    """{doc}"""\n')
        for method in methods:
            short = method.name.split(".")[1]
            responses = tuple(by_name[name].index for name in method.valid_responses)
            layout = tuple((slot, method.amqp_type(slot)) for slot in method.__slots__)
            out.append("    @dataclass(slots=True)")
            replies = " | ".join(method.valid_responses)
            out.append(f'    class {short}(Sync["{replies}"]):' if replies else f"    class {short}(Method):")
            out.append(
                f'        """``{method.name}`` ({class_id}, {method.index & 0xFFFF})."""\n\n'
                f"        index = {method.index:#010x}\n"
                f'        name = "{method.name}"\n'
                f"        responses = ({''.join(f'{r:#010x}, ' for r in responses)})\n"
                f"        layout = ({''.join(f'({s!r}, {t!r}), ' for s, t in layout)})\n".replace("'", '"')
            )
            for slot, amqp_type in layout:
                python = _PYTHON[amqp_type]
                out.append(f"        {slot}: {python} = {_default(method, slot, python)}")
            out.append("")
    out.append("\n\nINDEX: MappingProxyType[int, type[Method]] = MappingProxyType({")
    for cls_name in _CLASSES:
        for method in _methods(cls_name):
            out.append(f"    {cls_name}.{method.name.split('.')[1]}.index: {method.name},")
    out.append('})\n"""Method index -> its class."""\n')
    flags = commands.Basic.Properties.flags
    out.append("PROPERTIES: tuple[tuple[str, int, str], ...] = (")
    for slot in commands.Basic.Properties.__slots__:
        out.append(f'    ("{slot}", {flags[slot]:#06x}, "{commands.Basic.Properties.amqp_type(slot)}"),')
    out.append(
        ')\n"""The basic content properties: ``(attribute, flag bit, AMQP type)`` in wire order\n'
        '(``message_type`` is the spec\'s ``type``)."""\n'
    )
    text = "\n".join(out)
    ruff = [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"]
    return subprocess.run(ruff, input=text, capture_output=True, text=True, check=True).stdout


def main() -> int:
    """Write the module, or with --check say whether it is fresh."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if gear/wire/spec.py is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        fresh = TARGET.read_text() == text
        print("fresh" if fresh else f"stale: run {Path(__file__).name}")
        return 0 if fresh else 1
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
