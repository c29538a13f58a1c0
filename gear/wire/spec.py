"""AMQP 0-9-1 methods and basic properties as Gear's values (generated: do not edit).

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

__all__ = (
    "Basic",
    "Channel",
    "Confirm",
    "Connection",
    "Exchange",
    "FieldTable",
    "INDEX",
    "Method",
    "PROPERTIES",
    "Queue",
    "Reply",
    "Sync",
    "Tx",
)

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


class Connection:
    """Class 10: the ``connection`` methods."""

    @dataclass(slots=True)
    class Start(Sync["Connection.StartOk"]):
        """``Connection.Start`` (10, 10)."""

        index = 0x000A000A
        name = "Connection.Start"
        responses = (0x000A000B,)
        layout = (
            ("version_major", "octet"),
            ("version_minor", "octet"),
            ("server_properties", "table"),
            ("mechanisms", "longstr"),
            ("locales", "longstr"),
        )

        version_major: int = 0
        version_minor: int = 9
        server_properties: FieldTable = field(default_factory=dict)
        mechanisms: str | bytes = "PLAIN"
        locales: str | bytes = "en_US"

    @dataclass(slots=True)
    class StartOk(Method):
        """``Connection.StartOk`` (10, 11)."""

        index = 0x000A000B
        name = "Connection.StartOk"
        responses = ()
        layout = (
            ("client_properties", "table"),
            ("mechanism", "shortstr"),
            ("response", "longstr"),
            ("locale", "shortstr"),
        )

        client_properties: FieldTable = field(default_factory=dict)
        mechanism: str = "PLAIN"
        response: str | bytes = ""
        locale: str = "en_US"

    @dataclass(slots=True)
    class Secure(Sync["Connection.SecureOk"]):
        """``Connection.Secure`` (10, 20)."""

        index = 0x000A0014
        name = "Connection.Secure"
        responses = (0x000A0015,)
        layout = (("challenge", "longstr"),)

        challenge: str | bytes = ""

    @dataclass(slots=True)
    class SecureOk(Method):
        """``Connection.SecureOk`` (10, 21)."""

        index = 0x000A0015
        name = "Connection.SecureOk"
        responses = ()
        layout = (("response", "longstr"),)

        response: str | bytes = ""

    @dataclass(slots=True)
    class Tune(Sync["Connection.TuneOk"]):
        """``Connection.Tune`` (10, 30)."""

        index = 0x000A001E
        name = "Connection.Tune"
        responses = (0x000A001F,)
        layout = (
            ("channel_max", "short"),
            ("frame_max", "long"),
            ("heartbeat", "short"),
        )

        channel_max: int = 0
        frame_max: int = 0
        heartbeat: int = 0

    @dataclass(slots=True)
    class TuneOk(Method):
        """``Connection.TuneOk`` (10, 31)."""

        index = 0x000A001F
        name = "Connection.TuneOk"
        responses = ()
        layout = (
            ("channel_max", "short"),
            ("frame_max", "long"),
            ("heartbeat", "short"),
        )

        channel_max: int = 0
        frame_max: int = 0
        heartbeat: int = 0

    @dataclass(slots=True)
    class Open(Sync["Connection.OpenOk"]):
        """``Connection.Open`` (10, 40)."""

        index = 0x000A0028
        name = "Connection.Open"
        responses = (0x000A0029,)
        layout = (
            ("virtual_host", "shortstr"),
            ("capabilities", "shortstr"),
            ("insist", "bit"),
        )

        virtual_host: str = "/"
        capabilities: str = ""
        insist: bool = False

    @dataclass(slots=True)
    class OpenOk(Method):
        """``Connection.OpenOk`` (10, 41)."""

        index = 0x000A0029
        name = "Connection.OpenOk"
        responses = ()
        layout = (("known_hosts", "shortstr"),)

        known_hosts: str = ""

    @dataclass(slots=True)
    class Close(Sync["Connection.CloseOk"]):
        """``Connection.Close`` (10, 50)."""

        index = 0x000A0032
        name = "Connection.Close"
        responses = (0x000A0033,)
        layout = (
            ("reply_code", "short"),
            ("reply_text", "shortstr"),
            ("class_id", "short"),
            ("method_id", "short"),
        )

        reply_code: int = 0
        reply_text: str = ""
        class_id: int = 0
        method_id: int = 0

    @dataclass(slots=True)
    class CloseOk(Method):
        """``Connection.CloseOk`` (10, 51)."""

        index = 0x000A0033
        name = "Connection.CloseOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Blocked(Method):
        """``Connection.Blocked`` (10, 60)."""

        index = 0x000A003C
        name = "Connection.Blocked"
        responses = ()
        layout = (("reason", "shortstr"),)

        reason: str = ""

    @dataclass(slots=True)
    class Unblocked(Method):
        """``Connection.Unblocked`` (10, 61)."""

        index = 0x000A003D
        name = "Connection.Unblocked"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class UpdateSecret(Sync["Connection.UpdateSecretOk"]):
        """``Connection.UpdateSecret`` (10, 70)."""

        index = 0x000A0046
        name = "Connection.UpdateSecret"
        responses = (0x000A0047,)
        layout = (
            ("new_secret", "longstr"),
            ("reason", "shortstr"),
        )

        new_secret: str | bytes = ""
        reason: str = ""

    @dataclass(slots=True)
    class UpdateSecretOk(Method):
        """``Connection.UpdateSecretOk`` (10, 71)."""

        index = 0x000A0047
        name = "Connection.UpdateSecretOk"
        responses = ()
        layout = ()


class Channel:
    """Class 20: the ``channel`` methods."""

    @dataclass(slots=True)
    class Open(Sync["Channel.OpenOk"]):
        """``Channel.Open`` (20, 10)."""

        index = 0x0014000A
        name = "Channel.Open"
        responses = (0x0014000B,)
        layout = (("out_of_band", "shortstr"),)

        out_of_band: str = "0"

    @dataclass(slots=True)
    class OpenOk(Method):
        """``Channel.OpenOk`` (20, 11)."""

        index = 0x0014000B
        name = "Channel.OpenOk"
        responses = ()
        layout = (("channel_id", "longstr"),)

        channel_id: str | bytes = "0"

    @dataclass(slots=True)
    class Flow(Sync["Channel.FlowOk"]):
        """``Channel.Flow`` (20, 20)."""

        index = 0x00140014
        name = "Channel.Flow"
        responses = (0x00140015,)
        layout = (("active", "bit"),)

        active: bool = False

    @dataclass(slots=True)
    class FlowOk(Method):
        """``Channel.FlowOk`` (20, 21)."""

        index = 0x00140015
        name = "Channel.FlowOk"
        responses = ()
        layout = (("active", "bit"),)

        active: bool = False

    @dataclass(slots=True)
    class Close(Sync["Channel.CloseOk"]):
        """``Channel.Close`` (20, 40)."""

        index = 0x00140028
        name = "Channel.Close"
        responses = (0x00140029,)
        layout = (
            ("reply_code", "short"),
            ("reply_text", "shortstr"),
            ("class_id", "short"),
            ("method_id", "short"),
        )

        reply_code: int = 0
        reply_text: str = ""
        class_id: int = 0
        method_id: int = 0

    @dataclass(slots=True)
    class CloseOk(Method):
        """``Channel.CloseOk`` (20, 41)."""

        index = 0x00140029
        name = "Channel.CloseOk"
        responses = ()
        layout = ()


class Exchange:
    """Class 40: the ``exchange`` methods."""

    @dataclass(slots=True)
    class Declare(Sync["Exchange.DeclareOk"]):
        """``Exchange.Declare`` (40, 10)."""

        index = 0x0028000A
        name = "Exchange.Declare"
        responses = (0x0028000B,)
        layout = (
            ("ticket", "short"),
            ("exchange", "shortstr"),
            ("exchange_type", "shortstr"),
            ("passive", "bit"),
            ("durable", "bit"),
            ("auto_delete", "bit"),
            ("internal", "bit"),
            ("nowait", "bit"),
            ("arguments", "table"),
        )

        ticket: int = 0
        exchange: str = ""
        exchange_type: str = "direct"
        passive: bool = False
        durable: bool = False
        auto_delete: bool = False
        internal: bool = False
        nowait: bool = False
        arguments: FieldTable = field(default_factory=dict)

    @dataclass(slots=True)
    class DeclareOk(Method):
        """``Exchange.DeclareOk`` (40, 11)."""

        index = 0x0028000B
        name = "Exchange.DeclareOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Delete(Sync["Exchange.DeleteOk"]):
        """``Exchange.Delete`` (40, 20)."""

        index = 0x00280014
        name = "Exchange.Delete"
        responses = (0x00280015,)
        layout = (
            ("ticket", "short"),
            ("exchange", "shortstr"),
            ("if_unused", "bit"),
            ("nowait", "bit"),
        )

        ticket: int = 0
        exchange: str = ""
        if_unused: bool = False
        nowait: bool = False

    @dataclass(slots=True)
    class DeleteOk(Method):
        """``Exchange.DeleteOk`` (40, 21)."""

        index = 0x00280015
        name = "Exchange.DeleteOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Bind(Sync["Exchange.BindOk"]):
        """``Exchange.Bind`` (40, 30)."""

        index = 0x0028001E
        name = "Exchange.Bind"
        responses = (0x0028001F,)
        layout = (
            ("ticket", "short"),
            ("destination", "shortstr"),
            ("source", "shortstr"),
            ("routing_key", "shortstr"),
            ("nowait", "bit"),
            ("arguments", "table"),
        )

        ticket: int = 0
        destination: str = ""
        source: str = ""
        routing_key: str = ""
        nowait: bool = False
        arguments: FieldTable = field(default_factory=dict)

    @dataclass(slots=True)
    class BindOk(Method):
        """``Exchange.BindOk`` (40, 31)."""

        index = 0x0028001F
        name = "Exchange.BindOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Unbind(Sync["Exchange.UnbindOk"]):
        """``Exchange.Unbind`` (40, 40)."""

        index = 0x00280028
        name = "Exchange.Unbind"
        responses = (0x00280033,)
        layout = (
            ("ticket", "short"),
            ("destination", "shortstr"),
            ("source", "shortstr"),
            ("routing_key", "shortstr"),
            ("nowait", "bit"),
            ("arguments", "table"),
        )

        ticket: int = 0
        destination: str = ""
        source: str = ""
        routing_key: str = ""
        nowait: bool = False
        arguments: FieldTable = field(default_factory=dict)

    @dataclass(slots=True)
    class UnbindOk(Method):
        """``Exchange.UnbindOk`` (40, 51)."""

        index = 0x00280033
        name = "Exchange.UnbindOk"
        responses = ()
        layout = ()


class Queue:
    """Class 50: the ``queue`` methods."""

    @dataclass(slots=True)
    class Declare(Sync["Queue.DeclareOk"]):
        """``Queue.Declare`` (50, 10)."""

        index = 0x0032000A
        name = "Queue.Declare"
        responses = (0x0032000B,)
        layout = (
            ("ticket", "short"),
            ("queue", "shortstr"),
            ("passive", "bit"),
            ("durable", "bit"),
            ("exclusive", "bit"),
            ("auto_delete", "bit"),
            ("nowait", "bit"),
            ("arguments", "table"),
        )

        ticket: int = 0
        queue: str = ""
        passive: bool = False
        durable: bool = False
        exclusive: bool = False
        auto_delete: bool = False
        nowait: bool = False
        arguments: FieldTable = field(default_factory=dict)

    @dataclass(slots=True)
    class DeclareOk(Method):
        """``Queue.DeclareOk`` (50, 11)."""

        index = 0x0032000B
        name = "Queue.DeclareOk"
        responses = ()
        layout = (
            ("queue", "shortstr"),
            ("message_count", "long"),
            ("consumer_count", "long"),
        )

        queue: str = ""
        message_count: int = 0
        consumer_count: int = 0

    @dataclass(slots=True)
    class Bind(Sync["Queue.BindOk"]):
        """``Queue.Bind`` (50, 20)."""

        index = 0x00320014
        name = "Queue.Bind"
        responses = (0x00320015,)
        layout = (
            ("ticket", "short"),
            ("queue", "shortstr"),
            ("exchange", "shortstr"),
            ("routing_key", "shortstr"),
            ("nowait", "bit"),
            ("arguments", "table"),
        )

        ticket: int = 0
        queue: str = ""
        exchange: str = ""
        routing_key: str = ""
        nowait: bool = False
        arguments: FieldTable = field(default_factory=dict)

    @dataclass(slots=True)
    class BindOk(Method):
        """``Queue.BindOk`` (50, 21)."""

        index = 0x00320015
        name = "Queue.BindOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Purge(Sync["Queue.PurgeOk"]):
        """``Queue.Purge`` (50, 30)."""

        index = 0x0032001E
        name = "Queue.Purge"
        responses = (0x0032001F,)
        layout = (
            ("ticket", "short"),
            ("queue", "shortstr"),
            ("nowait", "bit"),
        )

        ticket: int = 0
        queue: str = ""
        nowait: bool = False

    @dataclass(slots=True)
    class PurgeOk(Method):
        """``Queue.PurgeOk`` (50, 31)."""

        index = 0x0032001F
        name = "Queue.PurgeOk"
        responses = ()
        layout = (("message_count", "long"),)

        message_count: int = 0

    @dataclass(slots=True)
    class Delete(Sync["Queue.DeleteOk"]):
        """``Queue.Delete`` (50, 40)."""

        index = 0x00320028
        name = "Queue.Delete"
        responses = (0x00320029,)
        layout = (
            ("ticket", "short"),
            ("queue", "shortstr"),
            ("if_unused", "bit"),
            ("if_empty", "bit"),
            ("nowait", "bit"),
        )

        ticket: int = 0
        queue: str = ""
        if_unused: bool = False
        if_empty: bool = False
        nowait: bool = False

    @dataclass(slots=True)
    class DeleteOk(Method):
        """``Queue.DeleteOk`` (50, 41)."""

        index = 0x00320029
        name = "Queue.DeleteOk"
        responses = ()
        layout = (("message_count", "long"),)

        message_count: int = 0

    @dataclass(slots=True)
    class Unbind(Sync["Queue.UnbindOk"]):
        """``Queue.Unbind`` (50, 50)."""

        index = 0x00320032
        name = "Queue.Unbind"
        responses = (0x00320033,)
        layout = (
            ("ticket", "short"),
            ("queue", "shortstr"),
            ("exchange", "shortstr"),
            ("routing_key", "shortstr"),
            ("arguments", "table"),
        )

        ticket: int = 0
        queue: str = ""
        exchange: str = ""
        routing_key: str = ""
        arguments: FieldTable = field(default_factory=dict)

    @dataclass(slots=True)
    class UnbindOk(Method):
        """``Queue.UnbindOk`` (50, 51)."""

        index = 0x00320033
        name = "Queue.UnbindOk"
        responses = ()
        layout = ()


class Basic:
    """Class 60: the ``basic`` methods."""

    @dataclass(slots=True)
    class Qos(Sync["Basic.QosOk"]):
        """``Basic.Qos`` (60, 10)."""

        index = 0x003C000A
        name = "Basic.Qos"
        responses = (0x003C000B,)
        layout = (
            ("prefetch_size", "long"),
            ("prefetch_count", "short"),
            ("global_", "bit"),
        )

        prefetch_size: int = 0
        prefetch_count: int = 0
        global_: bool = False

    @dataclass(slots=True)
    class QosOk(Method):
        """``Basic.QosOk`` (60, 11)."""

        index = 0x003C000B
        name = "Basic.QosOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Consume(Sync["Basic.ConsumeOk"]):
        """``Basic.Consume`` (60, 20)."""

        index = 0x003C0014
        name = "Basic.Consume"
        responses = (0x003C0015,)
        layout = (
            ("ticket", "short"),
            ("queue", "shortstr"),
            ("consumer_tag", "shortstr"),
            ("no_local", "bit"),
            ("no_ack", "bit"),
            ("exclusive", "bit"),
            ("nowait", "bit"),
            ("arguments", "table"),
        )

        ticket: int = 0
        queue: str = ""
        consumer_tag: str = ""
        no_local: bool = False
        no_ack: bool = False
        exclusive: bool = False
        nowait: bool = False
        arguments: FieldTable = field(default_factory=dict)

    @dataclass(slots=True)
    class ConsumeOk(Method):
        """``Basic.ConsumeOk`` (60, 21)."""

        index = 0x003C0015
        name = "Basic.ConsumeOk"
        responses = ()
        layout = (("consumer_tag", "shortstr"),)

        consumer_tag: str = ""

    @dataclass(slots=True)
    class Cancel(Sync["Basic.CancelOk"]):
        """``Basic.Cancel`` (60, 30)."""

        index = 0x003C001E
        name = "Basic.Cancel"
        responses = (0x003C001F,)
        layout = (
            ("consumer_tag", "shortstr"),
            ("nowait", "bit"),
        )

        consumer_tag: str = ""
        nowait: bool = False

    @dataclass(slots=True)
    class CancelOk(Method):
        """``Basic.CancelOk`` (60, 31)."""

        index = 0x003C001F
        name = "Basic.CancelOk"
        responses = ()
        layout = (("consumer_tag", "shortstr"),)

        consumer_tag: str = ""

    @dataclass(slots=True)
    class Publish(Method):
        """``Basic.Publish`` (60, 40)."""

        index = 0x003C0028
        name = "Basic.Publish"
        responses = ()
        layout = (
            ("ticket", "short"),
            ("exchange", "shortstr"),
            ("routing_key", "shortstr"),
            ("mandatory", "bit"),
            ("immediate", "bit"),
        )

        ticket: int = 0
        exchange: str = ""
        routing_key: str = ""
        mandatory: bool = False
        immediate: bool = False

    @dataclass(slots=True)
    class Return(Method):
        """``Basic.Return`` (60, 50)."""

        index = 0x003C0032
        name = "Basic.Return"
        responses = ()
        layout = (
            ("reply_code", "short"),
            ("reply_text", "shortstr"),
            ("exchange", "shortstr"),
            ("routing_key", "shortstr"),
        )

        reply_code: int = 0
        reply_text: str = ""
        exchange: str = ""
        routing_key: str = ""

    @dataclass(slots=True)
    class Deliver(Method):
        """``Basic.Deliver`` (60, 60)."""

        index = 0x003C003C
        name = "Basic.Deliver"
        responses = ()
        layout = (
            ("consumer_tag", "shortstr"),
            ("delivery_tag", "longlong"),
            ("redelivered", "bit"),
            ("exchange", "shortstr"),
            ("routing_key", "shortstr"),
        )

        consumer_tag: str = ""
        delivery_tag: int = 0
        redelivered: bool = False
        exchange: str = ""
        routing_key: str = ""

    @dataclass(slots=True)
    class Get(Sync["Basic.GetOk | Basic.GetEmpty"]):
        """``Basic.Get`` (60, 70)."""

        index = 0x003C0046
        name = "Basic.Get"
        responses = (
            0x003C0047,
            0x003C0048,
        )
        layout = (
            ("ticket", "short"),
            ("queue", "shortstr"),
            ("no_ack", "bit"),
        )

        ticket: int = 0
        queue: str = ""
        no_ack: bool = False

    @dataclass(slots=True)
    class GetOk(Method):
        """``Basic.GetOk`` (60, 71)."""

        index = 0x003C0047
        name = "Basic.GetOk"
        responses = ()
        layout = (
            ("delivery_tag", "longlong"),
            ("redelivered", "bit"),
            ("exchange", "shortstr"),
            ("routing_key", "shortstr"),
            ("message_count", "long"),
        )

        delivery_tag: int = 0
        redelivered: bool = False
        exchange: str = ""
        routing_key: str = ""
        message_count: int = 0

    @dataclass(slots=True)
    class GetEmpty(Method):
        """``Basic.GetEmpty`` (60, 72)."""

        index = 0x003C0048
        name = "Basic.GetEmpty"
        responses = ()
        layout = (("cluster_id", "shortstr"),)

        cluster_id: str = ""

    @dataclass(slots=True)
    class Ack(Method):
        """``Basic.Ack`` (60, 80)."""

        index = 0x003C0050
        name = "Basic.Ack"
        responses = ()
        layout = (
            ("delivery_tag", "longlong"),
            ("multiple", "bit"),
        )

        delivery_tag: int = 0
        multiple: bool = False

    @dataclass(slots=True)
    class Reject(Method):
        """``Basic.Reject`` (60, 90)."""

        index = 0x003C005A
        name = "Basic.Reject"
        responses = ()
        layout = (
            ("delivery_tag", "longlong"),
            ("requeue", "bit"),
        )

        delivery_tag: int = 0
        requeue: bool = True

    @dataclass(slots=True)
    class RecoverAsync(Method):
        """``Basic.RecoverAsync`` (60, 100)."""

        index = 0x003C0064
        name = "Basic.RecoverAsync"
        responses = ()
        layout = (("requeue", "bit"),)

        requeue: bool = False

    @dataclass(slots=True)
    class Recover(Sync["Basic.RecoverOk"]):
        """``Basic.Recover`` (60, 110)."""

        index = 0x003C006E
        name = "Basic.Recover"
        responses = (0x003C006F,)
        layout = (("requeue", "bit"),)

        requeue: bool = False

    @dataclass(slots=True)
    class RecoverOk(Method):
        """``Basic.RecoverOk`` (60, 111)."""

        index = 0x003C006F
        name = "Basic.RecoverOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Nack(Method):
        """``Basic.Nack`` (60, 120)."""

        index = 0x003C0078
        name = "Basic.Nack"
        responses = ()
        layout = (
            ("delivery_tag", "longlong"),
            ("multiple", "bit"),
            ("requeue", "bit"),
        )

        delivery_tag: int = 0
        multiple: bool = False
        requeue: bool = True


class Confirm:
    """Class 85: the ``confirm`` methods."""

    @dataclass(slots=True)
    class Select(Sync["Confirm.SelectOk"]):
        """``Confirm.Select`` (85, 10)."""

        index = 0x0055000A
        name = "Confirm.Select"
        responses = (0x0055000B,)
        layout = (("nowait", "bit"),)

        nowait: bool = False

    @dataclass(slots=True)
    class SelectOk(Method):
        """``Confirm.SelectOk`` (85, 11)."""

        index = 0x0055000B
        name = "Confirm.SelectOk"
        responses = ()
        layout = ()


class Tx:
    """Class 90: the ``tx`` methods."""

    @dataclass(slots=True)
    class Select(Sync["Tx.SelectOk"]):
        """``Tx.Select`` (90, 10)."""

        index = 0x005A000A
        name = "Tx.Select"
        responses = (0x005A000B,)
        layout = ()

    @dataclass(slots=True)
    class SelectOk(Method):
        """``Tx.SelectOk`` (90, 11)."""

        index = 0x005A000B
        name = "Tx.SelectOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Commit(Sync["Tx.CommitOk"]):
        """``Tx.Commit`` (90, 20)."""

        index = 0x005A0014
        name = "Tx.Commit"
        responses = (0x005A0015,)
        layout = ()

    @dataclass(slots=True)
    class CommitOk(Method):
        """``Tx.CommitOk`` (90, 21)."""

        index = 0x005A0015
        name = "Tx.CommitOk"
        responses = ()
        layout = ()

    @dataclass(slots=True)
    class Rollback(Sync["Tx.RollbackOk"]):
        """``Tx.Rollback`` (90, 30)."""

        index = 0x005A001E
        name = "Tx.Rollback"
        responses = (0x005A001F,)
        layout = ()

    @dataclass(slots=True)
    class RollbackOk(Method):
        """``Tx.RollbackOk`` (90, 31)."""

        index = 0x005A001F
        name = "Tx.RollbackOk"
        responses = ()
        layout = ()


INDEX: MappingProxyType[int, type[Method]] = MappingProxyType(
    {
        Connection.Start.index: Connection.Start,
        Connection.StartOk.index: Connection.StartOk,
        Connection.Secure.index: Connection.Secure,
        Connection.SecureOk.index: Connection.SecureOk,
        Connection.Tune.index: Connection.Tune,
        Connection.TuneOk.index: Connection.TuneOk,
        Connection.Open.index: Connection.Open,
        Connection.OpenOk.index: Connection.OpenOk,
        Connection.Close.index: Connection.Close,
        Connection.CloseOk.index: Connection.CloseOk,
        Connection.Blocked.index: Connection.Blocked,
        Connection.Unblocked.index: Connection.Unblocked,
        Connection.UpdateSecret.index: Connection.UpdateSecret,
        Connection.UpdateSecretOk.index: Connection.UpdateSecretOk,
        Channel.Open.index: Channel.Open,
        Channel.OpenOk.index: Channel.OpenOk,
        Channel.Flow.index: Channel.Flow,
        Channel.FlowOk.index: Channel.FlowOk,
        Channel.Close.index: Channel.Close,
        Channel.CloseOk.index: Channel.CloseOk,
        Exchange.Declare.index: Exchange.Declare,
        Exchange.DeclareOk.index: Exchange.DeclareOk,
        Exchange.Delete.index: Exchange.Delete,
        Exchange.DeleteOk.index: Exchange.DeleteOk,
        Exchange.Bind.index: Exchange.Bind,
        Exchange.BindOk.index: Exchange.BindOk,
        Exchange.Unbind.index: Exchange.Unbind,
        Exchange.UnbindOk.index: Exchange.UnbindOk,
        Queue.Declare.index: Queue.Declare,
        Queue.DeclareOk.index: Queue.DeclareOk,
        Queue.Bind.index: Queue.Bind,
        Queue.BindOk.index: Queue.BindOk,
        Queue.Purge.index: Queue.Purge,
        Queue.PurgeOk.index: Queue.PurgeOk,
        Queue.Delete.index: Queue.Delete,
        Queue.DeleteOk.index: Queue.DeleteOk,
        Queue.Unbind.index: Queue.Unbind,
        Queue.UnbindOk.index: Queue.UnbindOk,
        Basic.Qos.index: Basic.Qos,
        Basic.QosOk.index: Basic.QosOk,
        Basic.Consume.index: Basic.Consume,
        Basic.ConsumeOk.index: Basic.ConsumeOk,
        Basic.Cancel.index: Basic.Cancel,
        Basic.CancelOk.index: Basic.CancelOk,
        Basic.Publish.index: Basic.Publish,
        Basic.Return.index: Basic.Return,
        Basic.Deliver.index: Basic.Deliver,
        Basic.Get.index: Basic.Get,
        Basic.GetOk.index: Basic.GetOk,
        Basic.GetEmpty.index: Basic.GetEmpty,
        Basic.Ack.index: Basic.Ack,
        Basic.Reject.index: Basic.Reject,
        Basic.RecoverAsync.index: Basic.RecoverAsync,
        Basic.Recover.index: Basic.Recover,
        Basic.RecoverOk.index: Basic.RecoverOk,
        Basic.Nack.index: Basic.Nack,
        Confirm.Select.index: Confirm.Select,
        Confirm.SelectOk.index: Confirm.SelectOk,
        Tx.Select.index: Tx.Select,
        Tx.SelectOk.index: Tx.SelectOk,
        Tx.Commit.index: Tx.Commit,
        Tx.CommitOk.index: Tx.CommitOk,
        Tx.Rollback.index: Tx.Rollback,
        Tx.RollbackOk.index: Tx.RollbackOk,
    }
)
"""Method index -> its class."""

PROPERTIES: tuple[tuple[str, int, str], ...] = (
    ("content_type", 0x8000, "shortstr"),
    ("content_encoding", 0x4000, "shortstr"),
    ("headers", 0x2000, "table"),
    ("delivery_mode", 0x1000, "octet"),
    ("priority", 0x0800, "octet"),
    ("correlation_id", 0x0400, "shortstr"),
    ("reply_to", 0x0200, "shortstr"),
    ("expiration", 0x0100, "shortstr"),
    ("message_id", 0x0080, "shortstr"),
    ("timestamp", 0x0040, "timestamp"),
    ("message_type", 0x0020, "shortstr"),
    ("user_id", 0x0010, "shortstr"),
    ("app_id", 0x0008, "shortstr"),
    ("cluster_id", 0x0004, "shortstr"),
)
"""The basic content properties: ``(attribute, flag bit, AMQP type)`` in wire order
(``message_type`` is the spec's ``type``)."""
