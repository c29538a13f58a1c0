"""Contracts between services: typed interfaces declared once, served, called through typed proxies,
documented as AsyncAPI 3.0 and compared for breaking changes.

::

    class Repo(gear.Contract, Protocol, type="REPO"):
        async def get(self, query: ItemQuery) -> ItemFound: ...

    svc.implement(Repo, RepoHandlers())                 # the serving side, checked before start
    repo = svc.proxy(Repo, "REPO.host2")                # the calling side, checked by mypy
    found = await repo.get(ItemQuery(key="a"))

The names a service author needs are also on ``gear`` itself (``gear.Contract``, ``gear.gather``...);
:func:`asyncapi_document` and :func:`diff_documents` are what ``gear contract export`` and ``gear
contract diff`` run.
"""

from gear.contract.asyncapi import ASYNCAPI_VERSION, asyncapi_document
from gear.contract.diff import Change, Compatibility, diff_documents
from gear.contract.proxy import (
    Answer,
    call_sync,
    call_with_callback,
    gather,
    gather_sync,
    proxy_address,
    with_timeout,
)
from gear.contract.spec import (
    Contract,
    ContractError,
    ContractSpec,
    MethodSpec,
    contract_spec,
    is_contract,
    one_way,
    raises,
)

__all__ = (
    "ASYNCAPI_VERSION",
    "Answer",
    "Change",
    "Compatibility",
    "Contract",
    "ContractError",
    "ContractSpec",
    "MethodSpec",
    "asyncapi_document",
    "call_sync",
    "call_with_callback",
    "contract_spec",
    "diff_documents",
    "gather",
    "gather_sync",
    "is_contract",
    "one_way",
    "proxy_address",
    "raises",
    "with_timeout",
)
