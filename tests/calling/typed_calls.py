"""What type checkers see of calls (checked by ``mypy --strict`` in tests/examples/test_typecheck.py;
never run)."""

from __future__ import annotations

from typing import Any, assert_type

from pydantic import BaseModel

import gear


class Found(BaseModel):
    key: str


async def calls(svc: gear.Service) -> None:
    assert_type(await svc.rpc.call_as(Found, "REPO.h1", "get", {"key": "k"}), Found)
    assert_type(await svc.rpc.call_as(list[int], "REPO.h1", "get"), list[int])
    assert_type(await svc.rpc.call("REPO.h1", "get"), Any)
    assert_type(await svc.rpc.call_with_callback("REPO.h1", "get", callback=print), str)
    assert_type(await svc.rpc.call_reply_to("WEB", "REPO.h1", "get"), str)
    assert_type(await svc.rpc.gather("REPO.*", "get"), gear.Replies)
    assert_type(await svc.rpc.cast("REPO.*", "get"), bool)


def blocking_calls(svc: gear.Service) -> None:
    assert_type(svc.rpc.sync.call_as(Found, "REPO.h1", "get"), Found)
    assert_type(svc.rpc.sync.call("REPO.h1", "get"), Any)
    assert_type(svc.rpc.sync.gather("REPO.*", "get"), list[gear.Reply])
    assert_type(svc.rpc.sync.cast("REPO.*", "get"), bool)
