"""What the container scripts share: timed steps that say what they do, commands, and apt installs.

Standard library only: the scripts run before the project's virtualenv exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ("StepError", "apt_install", "run", "say", "step")

_POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
_POLICY_TEXT = "#!/bin/sh\n# Gear's scripts/_steps.py: no service starts during an install.\nexit 101\n"


class StepError(RuntimeError):
    """A step failed; the message says which and why."""


def say(prefix: str, text: str) -> None:
    """One progress line on stderr (stdout is kept for what callers parse)."""
    print(f"{prefix}: {text}", file=sys.stderr, flush=True)


@contextmanager
def step(prefix: str, what: str) -> Iterator[None]:
    """Say ``what`` is starting, then how long it took (or that it failed after how long)."""
    say(prefix, f"{what} ...")
    started = time.monotonic()
    try:
        yield
    except BaseException:
        say(prefix, f"{what}: FAILED after {time.monotonic() - started:.1f} s")
        raise
    say(prefix, f"{what}: done in {time.monotonic() - started:.1f} s")


def run(
    args: Sequence[str],
    *,
    timeout: float,
    quiet: bool = True,
    env: dict[str, str] | None = None,
    stdin: IO[bytes] | None = None,
) -> str:
    """Run a command and return its stdout.

    Raises:
        StepError: if it fails or outlives ``timeout``; the message holds the end of its output.
    """
    try:
        done = subprocess.run(
            list(args), capture_output=quiet, text=True, timeout=timeout, check=False, env=env, stdin=stdin
        )
    except subprocess.TimeoutExpired as exc:
        raise StepError(f"{args[0]} did not finish within {timeout:.0f} s") from exc
    except FileNotFoundError as exc:
        raise StepError(f"{args[0]}: command not found") from exc
    if done.returncode != 0:
        tail = "\n".join(((done.stdout or "") + (done.stderr or "")).strip().splitlines()[-15:])
        raise StepError(f"{' '.join(args[:3])} ... exited with {done.returncode}:\n{tail}")
    return done.stdout or ""


def apt_install(prefix: str, packages: Sequence[str]) -> None:
    """Install Debian packages without letting their services start.

    A package such as docker.io would otherwise start its daemon with the default bridge and iptables
    rules; ``policy-rc.d`` answering 101 ("action forbidden") is Debian's way to prevent that.

    Raises:
        StepError: if this is not a Debian-like root shell or apt-get fails.
    """
    if shutil.which("apt-get") is None:
        raise StepError(f"cannot install {' '.join(packages)}: no apt-get (not a Debian-like system)")
    if os.geteuid() != 0:
        raise StepError(f"cannot install {' '.join(packages)}: apt-get needs root")
    added_policy = not _POLICY_RC_D.exists()
    if added_policy:
        _POLICY_RC_D.write_text(_POLICY_TEXT)
        _POLICY_RC_D.chmod(0o755)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        with step(prefix, f"apt-get install {' '.join(packages)}"):
            run(["apt-get", "update", "-q"], timeout=600, env=env)
            install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
            run(install, timeout=900, env=env)
    finally:
        if added_policy:
            _POLICY_RC_D.unlink(missing_ok=True)
