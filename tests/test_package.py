"""Package hygiene: every module says what it exports, and the SDK stays light."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

import gear

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> list[Any]:
    """Every module of ``gear``; the pipeline's modules import pyspark, so they carry the spark mark."""
    names = []
    for info in pkgutil.walk_packages(gear.__path__, prefix="gear."):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return [
        pytest.param(name, marks=pytest.mark.spark) if name.startswith("gear.pipeline.") else name
        for name in sorted(names)
    ]


@pytest.mark.parametrize("module_name", _modules())
def test_every_module_declares_an_accurate_all(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} has no __all__"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ names what it lacks: {missing}"


def test_facade_all_is_sorted() -> None:
    assert list(gear.__all__) == sorted(gear.__all__)


def test_the_facade_names_each_public_name_where_type_checkers_and_the_loader_see_the_same() -> None:
    """``gear/__init__.py`` writes each name in its lazy map and in its ``TYPE_CHECKING`` imports
    (``import X as X``, which mypy and pyright read as a re-export): the two must say the same."""
    tree = ast.parse((ROOT / "gear" / "__init__.py").read_text())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    typed = {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    assert typed == gear._HOME
    assert set(gear.__all__) == {*typed, "Client"}


def test_importing_the_sdk_pulls_neither_the_broker_nor_spark() -> None:
    code = (
        "import sys, gear; "
        "bad = [m for m in ('gear.broker', 'gear.pipeline', 'pyspark') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"`import gear` imported {done.stdout.strip()}"


# -- import rules, checked at runtime in fresh interpreters -------------------------------------------

_SDK = (
    "gear.service",
    "gear.calling.rpc",
    "gear.link",
    "gear.amqp",
    "gear.session.reconnect",
    "aiormq",
    "aio_pika",
)


def _loaded_by(statement: str, prefixes: tuple[str, ...]) -> list[str]:
    code = (
        f"import sys; {statement}; "
        f"print(','.join(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in done.stdout.strip().split(",") if m]


def test_importing_the_broker_loads_neither_the_sdk_nor_its_amqp_client() -> None:
    assert _loaded_by("import gear.broker", _SDK) == []


@pytest.mark.parametrize(
    "module",
    ["gear.pipeline", pytest.param("gear.pipeline.job", marks=pytest.mark.spark), "gear.tracing.event"],
)
def test_what_spark_executors_load_pulls_in_no_sdk(module: str) -> None:
    """Spark unpickles the pipeline's functions on its executors: they must not need the SDK."""
    assert _loaded_by(f"import {module}", _SDK) == []


_METRICS_LIBRARIES = ("prometheus_client", "opentelemetry")


def test_a_service_without_a_metrics_port_or_the_otel_extra_loads_no_metrics_library() -> None:
    """``GEAR_OTEL=off`` stands for the ``otel`` extra missing: a service that serves and calls with no
    metrics port imports neither prometheus-client nor OpenTelemetry, and sets no meter."""
    code = textwrap.dedent(
        """
        import asyncio, os, sys
        os.environ["GEAR_OTEL"] = "off"
        import gear
        from gear.broker import Broker

        async def main():
            async with Broker(port=0) as broker:
                svc = gear.Service("REPO", "r1", url=broker.url)
                svc.handler("echo")(lambda x: x)
                async with svc:
                    assert await svc.rpc.call("REPO", "echo", 1) == 1
                    assert svc._events.meter is None

        asyncio.run(main())
        print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in {libraries!r})))
        """
    ).format(libraries=_METRICS_LIBRARIES)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_the_metrics_package_loads_its_libraries_only_where_they_are_used() -> None:
    assert _loaded_by("import gear.metrics, gear.metrics.exporters", _METRICS_LIBRARIES) == []
    assert _loaded_by("import gear.broker", _METRICS_LIBRARIES) == []


def test_gear_names_load_on_first_use() -> None:
    assert _loaded_by("import gear", _SDK) == []
    assert "gear.service" in _loaded_by("import gear; gear.Service", _SDK)


def _imports(path: Path) -> set[str]:
    """Every module a file imports (``from X import Y`` gives ``X`` and ``X.Y``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_only_the_brokers_server_does_io() -> None:
    """The broker's core is sans-I/O: sockets and the event loop belong to its asyncio shell."""
    package = ROOT / "gear" / "broker"
    shell = {package / "shell" / "server.py", package / "__main__.py"}
    offenders = {
        path.relative_to(package).as_posix(): sorted(
            m for m in _imports(path) if m.split(".")[0] in ("asyncio", "socket")
        )
        for path in package.rglob("*.py")
        if path not in shell and "store" not in path.relative_to(package).parts
    }
    assert {k: v for k, v in offenders.items() if v} == {}


_NO_IO = ("asyncio", "socket", "ssl", "selectors", "threading", "logging", "time")


@pytest.mark.parametrize("package", ["amqp", "wire"])
def test_the_protocol_cores_do_no_io_keep_no_time_and_log_nothing(package: str) -> None:
    """``gear.wire`` and the client core ``gear.amqp`` are sans-I/O: bytes in, events and bytes out;
    the socket, the event loop, the clock and the log belong to the shell (``gear.link``)."""
    offenders = {
        path.name: sorted(m for m in _imports(path) if m.split(".")[0] in _NO_IO)
        for path in (ROOT / "gear" / package).glob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_cli_uses_only_public_names() -> None:
    """``gear/cli/`` is glue over the public API: ``gear``'s facade, ``gear.broker``, ``gear.contract``,
    ``gear.pipeline``."""
    import gear.broker
    import gear.broker.shell.metrics
    import gear.contract
    import gear.pipeline

    public = {
        "gear": {*gear.__all__, "pipeline"},
        "gear.broker": set(gear.broker.__all__),
        "gear.broker.shell.metrics": set(
            gear.broker.shell.metrics.__all__
        ),  # imported when its port is asked for
        "gear.contract": set(gear.contract.__all__),
        "gear.pipeline": set(gear.pipeline.__all__),
        "gear.version": {"DISTRIBUTION", "version"},
        "gear.serving.deadletter": {"ParkedLetter", "list_dead_letters"},
        "gear.base.topology": {"dead_letter_queue"},
        "gear.doctor": set(importlib.import_module("gear.doctor").__all__),
        "gear.base.limits": set(importlib.import_module("gear.base.limits").__all__),
        "gear.ops.management": {"Management", "ManagementUnavailableError"},
        "gear.ops.prune": set(importlib.import_module("gear.ops.prune").__all__),
    }
    wrong = []
    for path in sorted((ROOT / "gear" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            own = isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gear.cli")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] == "gear"
                and not own
            ):
                names = {alias.name for alias in node.names}
                allowed = public.get(node.module)
                if allowed is None or not names <= allowed:
                    wrong.append(f"{path.name}: from {node.module} import {', '.join(sorted(names))}")
            elif isinstance(node, ast.Import):
                wrong += [
                    f"{path.name}: import {a.name}"
                    for a in node.names
                    if a.name.startswith("gear.") and a.name not in public
                ]
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gear.examples"):
                wrong.append(f"{path.name}: from {node.module} import ...")  # `gear demo` loads it by name
            if isinstance(node, ast.Import):
                examples = [a.name for a in node.names if a.name.startswith("gear.examples")]
                wrong += [f"{path.name}: import {name}" for name in examples]
    assert wrong == []


def test_the_demo_entry_point_the_cli_names_exists() -> None:
    """``gear demo`` reaches the example system only through ``DEMO_ENTRY``: it must resolve."""
    from gear.cli.demo import DEMO_ENTRY, _entry

    assert callable(_entry(DEMO_ENTRY))


def test_the_sdk_emits_trace_events_only_through_the_typed_emitter() -> None:
    """Attribute names and event kinds are assembled in ``gear.tracing.emitter`` only."""
    modules = ("gear.tracing", "gear.tracing.api")
    raw = {f"{module}.{name}" for module in modules for name in ("Attr", "EventName")}
    sdk = [
        *(ROOT / "gear").glob("*.py"),
        *(path for package in _SDK_PACKAGES for path in (ROOT / "gear" / package).rglob("*.py")),
    ]
    offenders = {path.relative_to(ROOT).as_posix(): sorted(_imports(path) & raw) for path in sdk}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_calling_and_serving_sides_do_not_know_each_other() -> None:
    """``gear.serving.inbound`` routes deliveries to both; neither imports the other nor the router."""
    sides = {"calling/rpc.py": "gear.serving.dispatch", "serving/dispatch.py": "gear.calling.rpc"}
    found = {
        name: sorted(
            m for m in _imports(ROOT / "gear" / name) if m.startswith((other, "gear.serving.inbound"))
        )
        for name, other in sides.items()
    }
    assert found == {"calling/rpc.py": [], "serving/dispatch.py": []}


# package: what else of gear its modules may import (the layer picture in docs/architecture.md). From the
# bottom: wire < amqp < base (+ errors) < link < session < calling | serving < contract < service.
_SDK_PACKAGES = ("wire", "amqp", "base", "link", "session", "calling", "serving", "ops")
_LAYERS = {
    "wire": (),
    "amqp": ("gear.wire",),
    "base": ("gear.errors",),  # the vocabulary: nothing above it
    # the wire layer's values (typed methods, Publish, Properties): what the link hands the core
    "link": (
        "gear.amqp",
        "gear.wire",
        "gear.errors",
        "gear.base.timers",
        "gear.base.redact",
        "gear.base.topology",
    ),
    "session": ("gear.link", "gear.amqp", "gear.base", "gear.errors", "gear.settings", "gear.tracing"),
    # the two sides are peers: neither imports the other (the router holds both through Protocols)
    "calling": ("gear.session", "gear.base", "gear.errors", "gear.tracing"),
    "serving": ("gear.session", "gear.link", "gear.base", "gear.errors", "gear.tracing"),
    "ops": ("gear.link", "gear.base", "gear.errors"),
    "contract": ("gear.calling", "gear.serving", "gear.base", "gear.errors"),
    "tracing": (),
    "metrics": ("gear.tracing", "gear.eventloop", "gear.version"),
    # the broker: no SDK package; the codec and the timer heap are shared by both ends
    "broker": ("gear.wire", "gear.base.timers", "gear.base.redact", "gear.eventloop"),
    "pipeline": ("gear.tracing",),
}


@pytest.mark.parametrize("package", sorted(_LAYERS))
def test_each_layer_imports_only_what_the_layer_picture_allows(package: str) -> None:
    allowed = (f"gear.{package}", *_LAYERS[package])
    wrong = {
        path.relative_to(ROOT).as_posix(): sorted(
            m for m in _imports(path) if m.split(".")[0] == "gear" and not m.startswith(allowed)
        )
        for path in (ROOT / "gear" / package).rglob("*.py")
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def test_no_other_amqp_client_or_codec_is_used() -> None:
    """Gear is its own AMQP client with its own codec (``gear.wire``): aiormq and aio-pika are peers in
    tests and benchmarks only, pamqp the codec's peer in its tests and the source of its generated spec."""
    wrong = {}
    for path in (ROOT / "gear").rglob("*.py"):
        found = sorted(m for m in _imports(path) if m.split(".")[0] in ("aiormq", "aio_pika", "pamqp"))
        if found:
            wrong[path.relative_to(ROOT).as_posix()] = found
    assert wrong == {}


_PARSERS = (
    "gear.wire.frames.FrameReader",
    "gear.wire.methods",
    "gear.wire.properties.decode_properties",
    "gear.wire.table",
)


def test_no_module_outside_the_protocol_cores_parses_frames() -> None:
    """One owner of each byte stream: frames are parsed by the client core (``gear.amqp``) and the
    broker's core only; the wire layer is what they share."""
    cores = ("gear/wire/", "gear/amqp/", "gear/broker/")
    wrong = {
        path.relative_to(ROOT).as_posix(): sorted(m for m in _imports(path) if m.startswith(_PARSERS))
        for path in (ROOT / "gear").rglob("*.py")
        if not path.relative_to(ROOT).as_posix().startswith(cores)
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def _foreign_private_names(path: Path) -> list[str]:
    """``module._name`` reads and ``from module import _name`` of modules outside Gear, and
    ``getattr(x, "_name")`` on anything."""
    tree = ast.parse(path.read_text())
    foreign: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            foreign.update(
                (a.asname or a.name).split(".")[0] for a in node.names if not a.name.startswith("gear")
            )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith("gear"):
            foreign.update(a.asname or a.name for a in node.names)
            found += [f"from {node.module} import {a.name}" for a in node.names if _private(a.name)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in foreign and base.id != "sys":
                found.append(f"{base.id}.{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"{node.func.id}(..., {node.args[1].value!r})")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_of_another_library_is_used() -> None:
    """Gear uses other libraries through their public API only (``sys._getframe`` is the standard
    library's documented way to read a caller's frame, and the one exception)."""
    wrong = {
        path.relative_to(ROOT).as_posix(): _foreign_private_names(path)
        for path in (ROOT / "gear").rglob("*.py")
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def _module_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere (type-only and function-level imports
    included), for every module under ``root``."""

    def name_of(path: Path) -> str:
        parts = path.relative_to(ROOT).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name and imported.startswith(package):
                targets.add(imported)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    found.append(" -> ".join([*path, nxt]))
                elif nxt not in path and nxt > start:
                    stack.append((nxt, [*path, nxt]))
    return found


@pytest.mark.parametrize("package", ["gear.tracing", "gear.amqp", "gear.link", "gear.wire"])
def test_the_sdks_packages_form_no_import_cycle(package: str) -> None:
    """Within each layer, type-only imports included: modules depend one way (a Protocol beside the
    module that needs it, instead of importing its caller). A package's ``__init__`` re-exports its
    modules and is left out."""
    root = ROOT / package.replace(".", "/")
    graph = {k: v - {package} for k, v in _module_graph(root, package).items() if k != package}
    assert _cycles(graph) == []


def _in_sdk_top(module: str) -> bool:
    """A module of the SDK's upper layers: ``gear/*.py`` and the sub-packages (not their ``__init__``)."""
    parts = module.split(".")
    if len(parts) == 2:
        return parts[1] not in _SDK_PACKAGES and module != "gear"
    return len(parts) == 3 and parts[1] in ("base", "session", "calling", "serving", "ops")


def test_the_calling_side_modules_form_no_import_cycle() -> None:
    """``gear/*.py`` and ``gear/{base,session,calling,serving,ops}/``, type-only imports included; the
    facade (``gear``) and the sub-packages' ``__init__`` are left out."""
    graph = {
        k: {m for m in v if _in_sdk_top(m)}
        for k, v in _module_graph(ROOT / "gear", "gear").items()
        if _in_sdk_top(k)
    }
    assert _cycles(graph) == []


def test_the_brokers_modules_form_no_import_cycle() -> None:
    """Type-only imports included, with no exception: each broker object is handed the narrow interface
    it needs (a Protocol beside it) instead of importing its parent; the per-method work
    (``operations``) sees the channel as ``ChannelView``."""
    package = "gear.broker"
    subpackages = {f"{package}.{p.name}" for p in (ROOT / "gear" / "broker").iterdir() if p.is_dir()}
    graph = {
        k: v - {package} - subpackages
        for k, v in _module_graph(ROOT / "gear" / "broker", package).items()
        if k != package and k not in subpackages
    }
    assert _cycles(graph) == []


_BROKER_LAYERS = {
    "model": ("errors", "store"),
    "node": ("model", "errors", "store"),
    "operations": ("node", "model", "errors"),
    "protocol": ("operations", "node", "model", "errors"),
    "shell": ("protocol", "operations", "node", "model", "errors", "store"),
    "store": (),
}
"""The broker's layers, from the bottom: what else of ``gear.broker`` each sub-package's modules may
import (``errors`` is shared; ``__init__`` and ``__main__`` sit above them all)."""


@pytest.mark.parametrize("layer", sorted(_BROKER_LAYERS))
def test_the_brokers_layers_import_only_downward(layer: str) -> None:
    allowed = tuple(f"gear.broker.{name}" for name in (layer, *_BROKER_LAYERS[layer]))
    wrong = {
        path.relative_to(ROOT).as_posix(): sorted(
            m
            for m in _imports(path)
            if m.startswith("gear.broker.") and not m.startswith(allowed) and m != "gear.broker"
        )
        for path in (ROOT / "gear" / "broker" / layer).rglob("*.py")
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def test_every_broker_module_lives_in_a_layer() -> None:
    """Only the facade, ``python -m gear.broker`` and the shared errors sit at the broker's top."""
    top = {p.name for p in (ROOT / "gear" / "broker").glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "errors.py"}
    dirs = {p.name for p in (ROOT / "gear" / "broker").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert dirs == set(_BROKER_LAYERS)


def test_every_sdk_module_lives_in_a_package_but_the_few_at_the_top() -> None:
    top = {p.stem for p in (ROOT / "gear").glob("*.py")}
    assert top == {"__init__", "_moved", "errors", "eventloop", "service", "settings", "version"}


def test_every_sub_package_says_what_lives_there_and_what_it_may_import() -> None:
    packages = [*(ROOT / "gear" / p for p in ("base", "session", "calling", "serving", "ops"))]
    packages += [ROOT / "gear" / "broker" / p for p in _BROKER_LAYERS if p != "store"]
    undocumented = [
        p.relative_to(ROOT).as_posix()
        for p in packages
        if "import" not in (ast.get_docstring(ast.parse((p / "__init__.py").read_text())) or "")
    ]
    assert undocumented == []


# -- the distribution: its name, what its wheel installs -----------------------------------------------

_INSTALL_HINT = re.compile(r"pip\s+install\s+['\"]?([A-Za-z][\w.-]*)\[")


def test_every_install_hint_names_the_distribution() -> None:
    """``pip install 'gear[spark]'`` installs an unrelated PyPI project: hints name ``gear-rpc``."""
    from gear.version import DISTRIBUTION

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == DISTRIBUTION
    texts = [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "gear").rglob("*.py"),
    ]
    named = {
        f"{path.relative_to(ROOT)}: {match.group(0)}": match.group(1)
        for path in texts
        for match in _INSTALL_HINT.finditer(path.read_text())
    }
    assert named, "no install hint found: the pattern no longer matches how hints are written"
    assert {where: name for where, name in named.items() if name != DISTRIBUTION} == {}


@pytest.mark.slow
def test_the_wheel_installs_gear_alone_with_both_commands(tmp_path: Path) -> None:
    """Only ``gear`` (with ``gear.cli`` and ``gear.examples`` inside) goes into site-packages, with the
    LICENSE beside its metadata."""
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = tmp_path.glob("gear_rpc-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (info,) = {n.split("/")[0] for n in names if ".dist-info/" in n}
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert {n.split("/")[0] for n in names} == {"gear", info}
    assert {"gear/cli/main.py", "gear/examples/demo.py", "gear/py.typed"} <= set(names)
    with zipfile.ZipFile(wheel) as archive:  # the license travels with the code (issue 40)
        assert archive.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        assert "License-Expression: MIT" in archive.read(f"{info}/METADATA").decode()
    assert "gear = gear.cli.main:app" in entry_points
    assert "gear-rpc = gear.cli.main:app" in entry_points


def test_the_classifiers_name_the_pythons_ci_runs() -> None:
    """pyproject says what is tested: its Python classifiers are the versions .ci/run has steps for."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    in_ci = set(re.findall(r'timed "Python (3\.\d+): ', (ROOT / ".ci" / "run").read_text()))
    assert declared == in_ci
    lowest = min(declared, key=lambda v: tuple(map(int, v.split("."))))
    assert project["requires-python"] == f">={lowest}"


def test_the_docs_extra_formats_signatures() -> None:
    """mkdocstrings lays the API's signatures out only with ruff or black installed: the docs extra
    brings one, so `pip install -e '.[docs]' && mkdocs serve` shows them readable (issue 40)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(re.match(r"(ruff|black)\b", requirement) for requirement in extras["docs"])
