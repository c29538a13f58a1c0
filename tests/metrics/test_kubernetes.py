"""The Kubernetes example (gear/examples/operations/kubernetes.yaml): a well-formed Deployment whose
probes reach Gear's operator port, whose command and settings are Gear's, and whose grace period
covers the preStop pause, the drain and the close. (A structural check: no cluster or kubectl here.)"""

from __future__ import annotations

from pathlib import Path

import yaml

import gear
from gear.cli.serve import load_service

MANIFEST = Path(gear.__file__).parent / "examples" / "operations" / "kubernetes.yaml"

_CLOSE_MARGIN = 3


def _deployment() -> dict:
    (document,) = list(yaml.safe_load_all(MANIFEST.read_text()))
    assert document["apiVersion"] == "apps/v1"
    assert document["kind"] == "Deployment"
    return document


def _container() -> dict:
    (container,) = _deployment()["spec"]["template"]["spec"]["containers"]
    return container


def _env() -> dict[str, dict]:
    return {item["name"]: item for item in _container()["env"]}


def test_the_selector_matches_the_pods_and_a_rollout_keeps_capacity() -> None:
    spec = _deployment()["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_the_probes_reach_the_operator_port() -> None:
    container = _container()
    env = _env()
    (port,) = container["ports"]
    assert int(env["GEAR_METRICS_PORT"]["value"]) == port["containerPort"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert container["startupProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": port["name"]}
    annotations = _deployment()["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(port["containerPort"])
    assert annotations["prometheus.io/path"] == "/metrics"


def test_every_gear_variable_is_a_setting_and_the_command_names_a_service() -> None:
    names = {name.removeprefix("GEAR_").lower() for name in _env() if name.startswith("GEAR_")}
    assert names <= set(gear.Settings.model_fields)
    command = _container()["command"]
    assert command[:2] == ["gear", "serve"]
    assert callable(load_service(command[2]))
    host = _env()["GEAR_HOST"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert host == "metadata.name"  # pod names are valid HOST words: letters, digits and '-'


def test_the_grace_period_covers_the_pause_the_drain_and_the_close() -> None:
    spec = _deployment()["spec"]["template"]["spec"]
    pre_stop = _container()["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    drain = float(_env()["GEAR_DRAIN_TIMEOUT"]["value"])
    assert spec["terminationGracePeriodSeconds"] >= float(pre_stop[1]) + drain + _CLOSE_MARGIN
    settings = gear.Settings(drain_timeout=drain, metrics_port=int(_env()["GEAR_METRICS_PORT"]["value"]))
    assert settings.drain_timeout == drain
