"""Configuration of one service instance, from arguments or ``GEAR_*`` environment variables."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from yarl import URL

from gear.base.address import default_host, validate_host, validate_type
from gear.base.limits import MAX_COUNT, MAX_PORT, MAX_SECONDS
from gear.base.redact import mask_secrets, mask_url

__all__ = ("Settings",)

_ENV_PREFIX = "GEAR_"


class Settings(BaseSettings):
    """Everything a :class:`gear.Service` needs to know; read from ``GEAR_*`` variables by default.

    ``GEAR_URL`` may list several brokers separated by commas; they are tried in turn on (re)connect.
    """

    # Every number has a range (gear.base.limits); inf and nan are refused, not read as "forever".
    model_config = SettingsConfigDict(
        env_prefix=_ENV_PREFIX, frozen=True, extra="forbid", allow_inf_nan=False
    )

    url: Annotated[tuple[str, ...], NoDecode] = ("amqp://guest:guest@localhost/",)
    """Broker URLs, tried in order (a cluster); ``GEAR_URL=amqp://a/,amqp://b/``."""
    type: str | None = None
    """The service TYPE (``WEB``, ``REPO``...); ``gear.Service("WEB")`` overrides it."""
    host: str = Field(default_factory=default_host)
    """The HOST word of this instance (default: the short host name)."""
    exchange: str = "gear"
    """The topic exchange every instance declares and publishes to."""
    timeout: float = Field(default=30.0, gt=0, le=MAX_SECONDS)
    """Default call/gather deadline in seconds; never infinite."""
    prefetch: int = Field(default=64, ge=1, le=65_535)
    """Unacknowledged deliveries per consumer (type and host channel each)."""
    heartbeat: int = Field(default=5, ge=0, le=65_535)
    """AMQP heartbeat timeout in seconds (0 disables, not advised). The broker sends something at
    least every ``heartbeat / 2`` s; nothing received for ``1.5 * heartbeat`` s declares the link dead
    (a silent partition is found in about 8 s with the default) and Gear reconnects."""
    busy_poll: float = Field(default=0.0, ge=0, le=1)
    """Seconds the event loop keeps polling the broker connection after each read or write instead of
    sleeping (``GEAR_BUSY_POLL=0.001``); 0, the default, is off. A reply or request that arrives within
    the window is read at once, without waking a sleeping process: lower latency for calls made one at
    a time, paid with a core kept busy while the window lasts (up to a whole core under steady
    traffic). For latency-critical services with a core to spare; ``benchmarks/one_call.py`` measures
    both sides of the trade on your machine."""
    handshake_timeout: float = Field(default=10.0, gt=0, le=MAX_SECONDS)
    """Seconds a connect attempt may take from TCP connect to ``connection.open-ok``."""
    reconnect_initial: float = Field(default=0.1, gt=0, le=MAX_SECONDS)
    """First reconnect delay in seconds; doubles per failed round, with jitter."""
    reconnect_max: float = Field(default=1.0, gt=0, le=MAX_SECONDS)
    """Upper bound of the reconnect delay (so calls succeed again within about a second of the
    broker's return)."""
    spread_urls: bool = True
    """With several broker URLs: each instance starts at a different one (a stable hash of its
    identity), so instances spread over a cluster's nodes. False: always the given order first."""
    failback_interval: float = Field(default=30.0, ge=0, le=MAX_SECONDS)
    """With several broker URLs: when connected to another one than this instance's first choice
    (after a failover), how often to check whether the first choice is back and move there
    (0: never). Spreads instances back over a cluster node that returns."""
    connect_wait: float = Field(default=30.0, gt=0, le=MAX_SECONDS)
    """How long ``start()`` keeps trying before raising ``ConnectError``."""
    quorum: bool = False
    """Declare the shared TYPE queue and each instance's TYPE.HOST queue as quorum queues: the setting
    for a RabbitMQ cluster (both survive the loss of a node). Switching an existing system needs its
    old queues deleted first: a queue cannot change its type."""
    delivery_limit: int = Field(default=20, ge=1, le=MAX_COUNT)
    """With ``quorum``: how many times a message may go back to its queue (its server crashed or lost
    its connection while handling it) before the broker dead-letters it (``x-delivery-limit``; 20 is
    RabbitMQ 4.x's own default, which 3.x lacks). A dead-lettered call fails at once with
    ``DeliveryLimitError``; ``gear dead-letters`` lists what was dropped."""
    consumer_disconnected_timeout: float | None = Field(default=2.0, ge=0, le=MAX_SECONDS)
    """With ``quorum``: seconds a quorum queue keeps what it handed to a consumer whose node became
    unreachable (died, or was cut off) before it returns it to the queue for another consumer
    (``x-consumer-disconnected-timeout``, declared on RabbitMQ 4.3 and later; older releases return it
    at once). RabbitMQ's own default is 60 s: every request a SIGKILLed node had handed to an instance
    would wait out its caller's deadline. ``None``: leave it to the broker (a policy, or its default).
    A queue declared with another value keeps it (a warning says so)."""
    hedge_after: float = Field(default=1.0, ge=0, le=MAX_SECONDS)
    """Seconds a call may stay silent (no reply, no sign that an instance runs it) before its caller
    publishes a copy, and again every 0.5 s until its deadline: a request handed to a consumer left on
    a cut-off cluster node is otherwise lost until the cluster declares that node down. A copy never
    runs twice: the instance's duplicate window answers it, and on the shared ``TYPE`` queue an
    instance runs a copy or a late request only once its caller said yes (``gear.session.hedge``). A handler
    that is merely slow tells its caller so and gets no copy. 0: never copy."""
    hedge_shared: bool = False
    """Copy silent calls to a shared ``TYPE`` too (``hedge_after``). Off by default: a copy there can
    run where the original already ran if the fault that silenced the call also lost that run's reply
    (it ran on the instance whose node was cut off just as it replied), so a call could run twice, on
    two instances (one call in four of twelve cuts measured). Off, only ``TYPE.HOST`` calls are copied
    (their window runs a request once), and a ``TYPE`` call parked on a consumer left on a cut-off
    node fails at its deadline; on, it is answered through a copy, at-least-once."""
    type_precedence_after_loss: float = Field(default=90.0, ge=0, le=MAX_SECONDS)
    """After a lost link, for this many seconds, the instance's new consumer of the shared ``TYPE``
    queue has precedence (``x-priority`` 1) over the others, its own consumer left on a cut-off node
    included, which would otherwise keep its share of the queue until the cluster declares that node
    down (``net_tick_timeout``). The other instances get what this one has no room for. 0: never."""
    probe_quiet: float = Field(default=2.0, ge=0, le=MAX_SECONDS)
    """Seconds without a delivery after which the instance checks, end to end, that its link still
    delivers: one small message to its own ``TYPE.HOST`` queue must come back within
    ``probe_timeout``, else the node is a zombie (connected, yet its queues deliver nothing: a failed
    data disk, a cut-off node) and the instance moves to another. The wait doubles after each probe
    that came back, up to ``probe_longest_quiet``; a delivery starts it afresh. So a busy instance never
    probes and an idle one sends one message every ``probe_longest_quiet`` seconds. 0: never probe."""
    probe_timeout: float = Field(default=2.0, gt=0, le=MAX_SECONDS)
    """Seconds a probe has to come back (see ``probe_quiet``)."""
    probe_longest_quiet: float = Field(default=30.0, gt=0, le=MAX_SECONDS)
    """The longest wait between two probes of an idle link (see ``probe_quiet``)."""
    instance_queue_ttl: float = Field(default=600.0, gt=0, le=7 * MAX_SECONDS)
    """``x-expires`` of the TYPE.HOST queue in seconds: how long it outlives its instance."""
    cast_retry_budget: float = Field(default=10.0, gt=0, le=MAX_SECONDS)
    """How long a returned cast is republished before ``on_undeliverable`` or ``UnroutableError``."""
    unroutable_after: int | None = Field(default=2, ge=1, le=MAX_COUNT)
    """A call fails with ``UnroutableError`` once the broker returned it this many times (no queue
    bound), before its deadline; ``None`` republishes it until the deadline (for an instance expected
    to appear, e.g. one that is starting). Casts keep trying for ``cast_retry_budget``."""
    republish_initial: float = Field(default=0.05, gt=0, le=MAX_SECONDS)
    """First delay before republishing a returned message; doubles up to ``republish_max``."""
    republish_max: float = Field(default=1.0, gt=0, le=MAX_SECONDS)
    """Upper bound of the republish delay."""
    drain_timeout: float = Field(default=10.0, ge=0, le=MAX_SECONDS)
    """On stop, how long to wait for handlers in flight."""
    handler_threads: int = Field(default=16, ge=1, le=1024)
    """Thread pool size for plain (blocking) handlers."""
    duplicate_window_entries: int = Field(default=100_000, ge=1, le=100 * MAX_COUNT)
    """Request ids the duplicate window remembers at most (past it, the first to expire leaves early)."""
    duplicate_window_bytes: int = Field(default=64 * 1024 * 1024, ge=0, le=2**40)
    """Bytes of replies the duplicate window caches at most."""
    max_message_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=512 * 1024 * 1024)
    """Largest encoded payload (request, cast or reply) Gear sends; larger ones fail at once with
    ``PayloadTooLargeError`` before anything is sent. Default 16 MiB: what RabbitMQ 4.x and the
    reference broker accept (``max_message_size``). RabbitMQ 3.x accepts up to 128 MiB: raise this
    only if the broker is configured for it (a larger message makes the broker close the channel)."""
    tls_ca: str | None = None
    """CA bundle (PEM) that signs the broker's certificate, for ``amqps://``; default: the system's CAs."""
    tls_cert: str | None = None
    """Client certificate (PEM) to present to brokers that ask for one (EXTERNAL login uses its CN)."""
    tls_key: str | None = None
    """Private key (PEM) of ``tls_cert``; omit it when the key is in the certificate file."""
    tls_verify: bool = True
    """Verify the broker's certificate and host name (``False`` lets anyone in between listen in)."""
    metrics_port: int | None = Field(default=None, ge=0, le=MAX_PORT)
    """Serve ``/metrics`` (Prometheus; ``pip install 'gear-rpc[metrics]'``), ``/livez`` and ``/readyz``
    on this port while the service runs (``GEAR_METRICS_PORT``; 0 picks a free one); unset: no port."""
    metrics_bind: str = "0.0.0.0"
    """The interface of ``metrics_port`` (every one by default, so that probes and scrapers reach it)."""
    trace: str | None = None
    """Directory for JSON-lines trace events (``GEAR_TRACE``); unset, empty or ``off``: tracing off."""
    trace_sample: float = Field(default=1.0, gt=0, le=1)
    """The share of traces this instance records, events and spans (``GEAR_TRACE_SAMPLE=0.05``): head
    sampling by trace id, the same traces on every instance (see :mod:`gear.tracing.sampling`). Give
    every instance the same rate; 1 records everything."""

    @staticmethod
    def explain(error: ValidationError) -> str:
        """One line saying what is wrong in ``error`` (raised by ``Settings(...)``), for a person: no
        pydantic jargon, passwords in URLs masked.

        A validator's own message stands alone (it names the value already); any other problem names
        the setting and its environment variable: ``timeout (GEAR_TIMEOUT): Input should be greater
        than 0, got -1``.
        """
        parts: list[str] = []
        for problem in error.errors(include_url=False):
            cause = problem.get("ctx", {}).get("error")
            if problem["type"] == "value_error" and cause is not None:
                parts.append(str(cause))
                continue
            where = ".".join(str(part) for part in problem["loc"])
            field = str(problem["loc"][0]) if problem["loc"] else ""
            name = f"{where} ({_ENV_PREFIX}{field.upper()})" if field in Settings.model_fields else where
            shown = "" if problem["type"] == "missing" else f", got {problem.get('input')!r}"
            parts.append(f"{name or 'settings'}: {problem['msg']}{shown}")
        return mask_secrets("; ".join(parts) or "invalid settings")

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, (tuple(mask_url(u) for u in value) if name == "url" else value)

    @field_validator("url", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("url")
    @classmethod
    def _need_one(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one broker URL is needed")
        for url in value:
            if not url.startswith(("amqp://", "amqps://")):
                raise ValueError(f"broker URL {mask_url(url)!r} must start with amqp:// or amqps://")
            try:
                parsed = URL(url)
                host, _port = parsed.host, parsed.port  # the port is parsed lazily: check it too
            except ValueError as exc:
                raise ValueError(f"broker URL {mask_url(url)!r} is malformed: {exc}") from None
            if not host:
                raise ValueError(f"broker URL {mask_url(url)!r} has no host (e.g. amqp://localhost:5672/)")
        return value

    @model_validator(mode="after")
    def _key_needs_cert(self) -> Settings:
        if self.tls_key is not None and self.tls_cert is None:
            raise ValueError("tls_key is set without tls_cert: give the client certificate too")
        return self

    @field_validator("type")
    @classmethod
    def _check_type(cls, value: str | None) -> str | None:
        return None if value is None else validate_type(value)

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        return validate_host(value)
