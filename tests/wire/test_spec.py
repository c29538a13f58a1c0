"""gear/wire/spec.py is what scripts/gen_wire_spec.py writes from pamqp's spec data today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_wire_spec.py"


def test_the_generated_spec_is_fresh() -> None:
    loader = importlib.util.spec_from_file_location("gen_wire_spec", _SCRIPT)
    assert loader is not None
    assert loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    assert module.TARGET.read_text() == module.render(), "stale: run scripts/gen_wire_spec.py"
