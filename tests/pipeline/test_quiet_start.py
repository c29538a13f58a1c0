"""``run_analyze`` in a fresh process: the JVM's own output goes to ``spark.log`` beside the report, never
to the terminal, and a small input gets the small-input profile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from gear.pipeline import run_analyze
    from gear.testing.traces.generate import generate

    generate(sys.argv[1], roots=30, seed=3)
    summary = run_analyze(sys.argv[1], sys.argv[2])
    print(json.dumps({k: summary[k] for k in ("spark_profile", "calls", "report")}))
    """
)


def test_the_jvm_writes_to_spark_log_not_the_terminal(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    env = {k: v for k, v in os.environ.items() if k not in ("GEAR_SPARK_PROFILE", "SPARK_MASTER")}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "traces"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["spark_profile"] == "small input"
    assert found["calls"]["total"] > 0
    log = (tmp_path / "out" / "spark.log").read_text()
    assert "log level" in log  # PySpark's banner, which used to land in the terminal
    assert Path(found["report"]) == tmp_path / "out" / "report.html"


def test_the_profile_can_be_forced_and_is_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from gear.pipeline.job import SMALL_INPUT_BYTES, input_bytes, use_small_profile

    (tmp_path / "a.jsonl").write_text("{}\n" * 10)
    assert input_bytes([str(tmp_path)]) == 30
    assert input_bytes(["hdfs://nn/traces"]) is None
    monkeypatch.delenv("GEAR_SPARK_PROFILE", raising=False)
    assert use_small_profile([str(tmp_path)])
    assert not use_small_profile(["s3a://bucket/traces"])  # size unknown: the default profile
    monkeypatch.setenv("GEAR_SPARK_PROFILE", "default")
    assert not use_small_profile([str(tmp_path)])
    monkeypatch.setenv("GEAR_SPARK_PROFILE", "fast")
    with pytest.raises(ValueError, match="GEAR_SPARK_PROFILE must be one of auto, small, default"):
        use_small_profile([str(tmp_path)])
    assert SMALL_INPUT_BYTES >= 1 << 20
