"""The code blocks of the docs and the README, and how a page runs them as a reader would.

The rules (docs/development.md, "Writing the docs", says the same for writers):

* Every fenced ``python`` and ``bash`` block runs, unless the line right before it is
  ``<!-- not-run: REASON -->`` (a reason is required).
* A page runs in a fresh folder, its blocks in order. The python blocks without a title, taken in
  order, are one program; it runs (``python``, the project's interpreter) after its last block.
  A python block with ``title="NAME.py"`` is a file the reader saves: it is written to NAME.py, and a
  later bash block runs it.
* A bash block runs with ``bash -euo pipefail`` in that folder, with the project's ``python`` and
  ``gear`` first on PATH; it must exit 0, or N after ``<!-- run: exit N -->``. An ``export NAME=VALUE``
  line also holds for the page's later blocks. ``<!-- run: background until "TEXT" -->`` starts a
  command that keeps running (a broker, a service): the page goes on once TEXT appears in its output,
  and it is stopped (SIGINT, as Ctrl-C) when the page ends.
* A ``text`` block after ``<!-- output ... -->`` is what the block before it prints: the python
  program's output blocks, joined, are exactly its standard output; a bash block's output must hold
  each line of its block in order (``...`` matches anything, runs of spaces match any space).
* The docs use ports 5680 and 5681 for reference brokers they start, 8080 for HTTP and 9464 for
  metrics; a test runs each page with free ports in their place, so runs side by side never meet.
  Nothing else is changed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PORTS = (5680, 5681, 8080, 9464)
"""The fixed ports the docs use, replaced by free ones when a test runs a page."""
RUN_LANGUAGES = ("python", "bash")

_FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>```+)(?P<info>[^`\n]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*(?P<kind>not-run|run|output)(?::\s*(?P<arg>.*?))?\s*-->\s*$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_BACKGROUND = re.compile(r'^background until "(?P<text>[^"]+)"$')
_EXIT = re.compile(r"^exit (?P<code>\d+)$")
_EXPORT = re.compile(r"^export (?P<name>[A-Za-z_]\w*)=(?P<value>.*)$")


class DocsError(AssertionError):
    """A page breaks the rules or does not do what it says."""


@dataclass
class Block:
    """One fenced block and the directive before it."""

    path: Path
    line: int
    language: str
    title: str | None
    body: str
    directive: str | None = None
    """``not-run``, ``run`` or ``output``, from the comment on the line before the fence."""
    argument: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.directive != "not-run"


def parse(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with their directives.

    Raises:
        DocsError: an unclosed fence, a directive that is not right before a block, a ``not-run``
            without a reason, or a ``run`` directive on a block that does not run.
    """
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    pending: tuple[int, str, str] | None = None
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        fence = _FENCE.match(line)
        if directive:
            if pending is not None:
                raise DocsError(f"{path}:{pending[0] + 1}: a directive that is not right before a block")
            pending = (i, directive.group("kind"), (directive.group("arg") or "").strip())
            i += 1
            continue
        if fence:
            indent, ticks = fence.group("indent"), fence.group("fence")
            info = fence.group("info").strip()
            language = info.split()[0] if info else ""
            title = _TITLE.search(info)
            end = i + 1
            while end < len(lines) and lines[end].rstrip() != indent + ticks:
                end += 1
            if end == len(lines):
                raise DocsError(f"{path}:{i + 1}: the fence is never closed")
            body = textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n"
            block = Block(path, i + 1, language, title.group("title") if title else None, body)
            if pending is not None:
                if pending[0] != i - 1:
                    raise DocsError(f"{path}:{pending[0] + 1}: a directive that is not right before a block")
                block.directive, block.argument = pending[1], pending[2]
                pending = None
            _check(block)
            blocks.append(block)
            i = end + 1
            continue
        if pending is not None and line.strip():
            raise DocsError(f"{path}:{pending[0] + 1}: a directive that is not right before a block")
        i += 1
    if pending is not None:
        raise DocsError(f"{path}:{pending[0] + 1}: a directive at the end of the page")
    return blocks


def _check(block: Block) -> None:
    if block.directive == "not-run" and not block.argument:
        raise DocsError(f"{block.where}: `<!-- not-run: REASON -->` needs a reason")
    if block.directive == "run":
        if block.language != "bash":
            raise DocsError(f"{block.where}: `<!-- run: ... -->` is for bash blocks")
        if not (_BACKGROUND.match(block.argument) or _EXIT.match(block.argument)):
            raise DocsError(f'{block.where}: `run:` takes `background until "TEXT"` or `exit N`')
    if block.directive == "output" and block.language != "text":
        raise DocsError(f"{block.where}: `<!-- output -->` goes before a text block")
    if block.language == "python" and block.title and not block.title.endswith(".py"):
        raise DocsError(f"{block.where}: a python block's title is the file it is saved as (NAME.py)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def expect_lines(expected: str, output: str, where: str) -> None:
    """Each non-empty line of ``expected`` matches a line of ``output``, in order.

    ``...`` stands for anything and a run of spaces for any run of spaces.
    """
    got = output.splitlines()
    at = 0
    for want in (w for w in expected.splitlines() if w.strip()):
        parts = [re.escape(p) for p in re.split(r"\s+", want.strip())]
        pattern = re.compile(r"\s+".join(parts).replace(re.escape("..."), ".*"))
        while at < len(got) and not pattern.fullmatch(got[at].strip()):
            at += 1
        if at == len(got):
            raise DocsError(f"{where}: the output has no line like {want!r} (in order):\n{output}")
        at += 1


@dataclass
class Page:
    """Runs one page's blocks in a folder, as the rules above say."""

    path: Path
    folder: Path
    timeout: float = 120.0
    ports: dict[int, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    background: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)
    ran: list[Block] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ports = {port: free_port() for port in PORTS}
        bin_dir = str(Path(sys.executable).parent)
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
            "NO_COLOR": "1",
            "COLUMNS": "120",
        }
        for name in [n for n in self.env if n.startswith("GEAR_") and not n.startswith("GEAR_TEST")]:
            del self.env[name]  # the page sets what it needs, as a reader's fresh shell would

    def _ported(self, text: str) -> str:
        for port, free in self.ports.items():
            text = re.sub(rf"\b{port}\b", str(free), text)
        return text

    def run(self) -> list[Block]:
        """Run every block; returns those that ran.

        Raises:
            DocsError: a block failed, or printed something else than the page says.
        """
        blocks = parse(self.path)
        program = [b for b in blocks if b.runs and b.language == "python" and not b.title]
        last = program[-1] if program else None
        source: list[str] = []
        printed: list[str] = []
        previous: Block | None = None
        bash_output = ""
        try:
            for block in blocks:
                if block.directive == "output":
                    if previous is None:
                        raise DocsError(f"{block.where}: an output block with no block before it")
                    if previous.language == "python" and previous.title:
                        raise DocsError(
                            f"{block.where}: a file block prints nothing; show a command's output"
                        )
                    if previous.language == "python":
                        printed.append(block.body)
                    else:
                        expect_lines(self._ported(block.body), bash_output, block.where)
                    continue
                if not block.runs:
                    continue
                previous = block
                self.ran.append(block)
                if block.language == "python" and block.title:
                    (self.folder / block.title).write_text(self._ported(block.body))
                elif block.language == "python":
                    source.append(self._ported(block.body))
                    if block is last:
                        self._program("\n".join(source), block)
                else:
                    bash_output = self._bash(block)
            if last is not None and printed:
                self._check_program(last, "".join(printed))
        finally:
            self.stop()
        return self.ran

    # -- python -----------------------------------------------------------------------------------

    _program_output: str = ""

    def _program(self, source: str, block: Block) -> None:
        script = self.folder / f"_{self.path.stem}_page.py"
        script.write_text(source)
        done = self._run([sys.executable, str(script)], block)
        if done.returncode != 0:
            raise DocsError(f"{block.where}: the page's python program failed:\n{done.stdout}{done.stderr}")
        self._program_output = done.stdout

    def _run(self, command: list[str], block: Block) -> subprocess.CompletedProcess[str]:
        """Run ``command`` in the page's folder and environment, within the page's timeout."""
        try:
            return subprocess.run(
                command,
                cwd=self.folder,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise DocsError(f"{block.where}: still running after {self.timeout} s") from exc

    def _check_program(self, block: Block, printed: str) -> None:
        if self._program_output.splitlines() != printed.splitlines():
            raise DocsError(
                f"{block.where}: the page's python program printed\n{self._program_output}\n"
                f"where the page's output blocks say\n{printed}"
            )

    # -- bash -------------------------------------------------------------------------------------

    def _bash(self, block: Block) -> str:
        body = self._ported(block.body)
        for line in body.splitlines():
            export = _EXPORT.match(line.strip())
            if export:
                value = shlex.split(export.group("value"))
                self.env[export.group("name")] = value[0] if value else ""
        command = ["bash", "-euo", "pipefail", "-c", body]
        background = _BACKGROUND.match(block.argument) if block.directive == "run" else None
        if background:
            self._start(command, background.group("text"), block)
            return ""
        wanted = int(m.group("code")) if (m := _EXIT.match(block.argument)) else 0
        done = self._run(command, block)
        if done.returncode != wanted:
            raise DocsError(
                f"{block.where}: exited {done.returncode}, not {wanted}:\n{body}\n{done.stdout}{done.stderr}"
            )
        return done.stdout + done.stderr

    def _start(self, command: list[str], ready: str, block: Block) -> None:
        log = self.folder / f"_background_{len(self.background)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                command,
                cwd=self.folder,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.background.append((proc, log))
        deadline = time.monotonic() + 60
        while ready not in log.read_text(errors="replace"):
            if proc.poll() is not None:
                raise DocsError(
                    f"{block.where}: exited {proc.returncode} before {ready!r}:\n{log.read_text()}"
                )
            if time.monotonic() > deadline:
                raise DocsError(f"{block.where}: no {ready!r} within 60 s:\n{log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop what the page started in the background: SIGINT (Ctrl-C), then SIGKILL after 15 s."""
        for proc, _ in reversed(self.background):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.background.clear()


def pages() -> list[Path]:
    """Every Markdown file whose blocks the tests run: README.md and docs/**/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def load_script(path: Path) -> ModuleType:
    """Import a script of ``benchmarks/`` or ``scripts/`` (folders that are no package) by its path."""
    spec = importlib.util.spec_from_file_location(f"_docs_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
