"""The example system end to end: every routing form, the nested call, and the errors, on both brokers."""

from __future__ import annotations

from gear.examples.scenario import KEYS, run_scenario
from gear.examples.system import Names, running_system
from tests.backends import BrokerHandle


async def test_scenario_holds_on_every_routing_form(broker: BrokerHandle, system_names: Names) -> None:
    lines: list[str] = []
    async with running_system(broker.url, names=system_names) as system:
        outcome = await run_scenario(system, lines.append)
    failed = [name for name, passed in outcome.checks.items() if not passed]
    assert not failed, "\n".join(lines)
    for section in (
        "point-to-point",
        "stateless",
        "multicast",
        "broadcast",
        "errors",
        "plain handler",
        "deadlines",
    ):
        assert any(section in line for line in lines), section


async def test_repo_keeps_its_keys_to_itself(broker: BrokerHandle, system_names: Names) -> None:
    async with running_system(broker.url, names=system_names) as system:
        for key, value in KEYS.items():
            await system.web.put(key, value)
        answers = await system.web.census(f"{system.names.repo}.*", expected=3)
        held = {a.sender: a.value().items for a in answers}
        assert sum(held.values()) == len(KEYS)
        # Asking the wrong REPO directly finds nothing: the data is per instance.
        key = "alice"
        owner = system.web.repo_for(key)
        other = next(f"{system.names.repo}.{s.host}" for s in system.repos if not owner.endswith(s.host))
        found = await system.web.service.rpc.call(other, "get", {"key": key}, timeout=5)
        assert found["value"] is None
        assert (await system.web.lookup(key)).value == KEYS[key]


async def test_reload_can_change_the_ring_ctrl_uses(broker: BrokerHandle, system_names: Names) -> None:
    async with running_system(broker.url, names=system_names) as system:
        await system.web.put("alice", "tea")
        owner = system.web.repo_for("alice").split(".")[1]
        # Point every CTRL at a ring without the owner: lookups now ask another REPO, which knows nothing.
        others = [s.host for s in system.repos if s.host != owner]
        await system.web.reload(3, others)
        answers = await system.web.census(f"{system.names.ctrl}.*", expected=2)
        assert {a.value().config_version for a in answers} == {3}
        found = await system.web.lookup("alice")
        assert found.repo_host in others
        assert found.value is None
