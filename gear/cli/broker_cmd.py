"""``gear broker``: run the reference AMQP 0-9-1 broker in the foreground."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

import gear
from gear import mask_url
from gear.base.limits import MAX_COUNT
from gear.cli.options import LogLevelOpt, log_level
from gear.cli.output import ExitCode, configure_logging, fail
from gear.cli.signals import run_until_signal

__all__ = ("broker", "hash_password_command", "parse_size", "parse_user", "parse_watermark", "register")

_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}


def parse_watermark(text: str) -> float | int:
    """``0.4`` (a fraction of RAM, as RabbitMQ's ``vm_memory_high_watermark``) or bytes: ``200MB``, ``1GiB``.

    Raises:
        typer.BadParameter: for anything else.
    """
    value = text.strip()
    try:
        fraction = float(value)
    except ValueError:
        fraction = None
    if fraction is not None and "." in value:
        if not 0 < fraction <= 1:
            raise typer.BadParameter(
                "a fraction of RAM must be in (0, 1]", param_hint="--memory-high-watermark"
            )
        return fraction
    size = _size(value)
    if not size:
        raise typer.BadParameter(
            "expected a fraction of RAM (0.4) or a size in bytes (500000000, 200MB, 1GiB)",
            param_hint="--memory-high-watermark",
        )
    return size


def parse_size(text: str, option: str) -> int:
    """A size in bytes for ``option``: ``134217728``, ``128MiB``, ``50MB`` (MB = 1000**2, MiB = 1024**2).

    Raises:
        typer.BadParameter: not a size, or zero.
    """
    size = _size(text.strip())
    if not size:
        raise typer.BadParameter("expected a size in bytes (50000000, 50MB, 128MiB)", param_hint=option)
    return size


def _size(value: str) -> int | None:
    match = re.fullmatch(r"(\d+)\s*([kmg]i?)?b?", value.lower())
    return int(match.group(1)) * _UNITS[match.group(2) or ""] if match else None


def parse_user(text: str) -> tuple[str, str]:
    """``NAME:PASSWORD`` (the password may contain colons).

    Raises:
        typer.BadParameter: no colon, or an empty name.
    """
    name, colon, password = text.partition(":")
    if not colon or not name:
        raise typer.BadParameter("expected NAME:PASSWORD", param_hint="--user")
    return name, password


def broker(
    port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="TCP port; 0 picks a free one. Default: 5672, or 5671 with TLS.",
            show_default=False,
        ),
    ] = None,
    bind: Annotated[
        str, typer.Option(help="Interface to listen on (0.0.0.0 for every interface).")
    ] = "127.0.0.1",
    memory_high_watermark: Annotated[
        str | None,
        typer.Option(
            help="When the messages held exceed this, publishers get connection.blocked: a fraction of RAM "
            "(0.4) or a size (200MB, 1GiB).",
            show_default=False,
        ),
    ] = None,
    max_message_size: Annotated[
        str,
        typer.Option(
            help="Largest message body (128MiB, 1000000); larger publishes get 406 PRECONDITION_FAILED. "
            "RabbitMQ's default is 16MiB in 4.x and was 128MiB in 3.x; at most 512MiB.",
        ),
    ] = "16MiB",
    disk_free_limit: Annotated[
        str | None,
        typer.Option(
            help="When the disk holding the working directory has less free space than this (50MB, 1GB), "
            "publishers get connection.blocked 'low on disk'. RabbitMQ's default is 50MB; unset: no "
            "disk alarm.",
            show_default=False,
        ),
    ] = None,
    max_connections: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_COUNT,
            help="At this many connections, new sockets are accepted but never answered, like RabbitMQ "
            "at its socket limit (to test clients' handshake timeouts).",
            show_default=False,
        ),
    ] = None,
    user: Annotated[
        list[str] | None,
        typer.Option(
            "--user",
            envvar="GEAR_BROKER_USERS",
            help="A user NAME:PASSWORD (repeatable; env: space-separated), hashed at start and kept nowhere. "
            "Given users replace the default guest/guest and may use every vhost. Note that options show "
            "in the process list: prefer the env or --users-file.",
            show_default=False,
        ),
    ] = None,
    users_file: Annotated[
        Path | None,
        typer.Option(
            envvar="GEAR_BROKER_USERS_FILE",
            help="RabbitMQ-style definitions JSON: users with password_hash (see `gear hash-password`), "
            "vhosts and permissions (configure/write/read regexps). A RabbitMQ export loads as is.",
            show_default=False,
        ),
    ] = None,
    vhost: Annotated[
        list[str] | None,
        typer.Option("--vhost", help="A virtual host to create besides / (repeatable).", show_default=False),
    ] = None,
    allow_guest_remote: Annotated[
        bool,
        typer.Option(
            help="Let guest log in from any address (RabbitMQ: loopback_users = none). Unsafe: without it "
            "guest works from loopback only, and the broker refuses to listen on a network interface "
            "when guest is its only user.",
        ),
    ] = False,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            envvar="GEAR_BROKER_TLS_CERT",
            help="PEM certificate: listen for amqps:// only.",
            show_default=False,
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(envvar="GEAR_BROKER_TLS_KEY", help="PEM private key of --tls-cert.", show_default=False),
    ] = None,
    tls_ca: Annotated[
        Path | None,
        typer.Option(
            envvar="GEAR_BROKER_TLS_CA",
            help="PEM CA bundle for client certificates: clients may present one, and log in with "
            "EXTERNAL as the user named by its subject's CN.",
            show_default=False,
        ),
    ] = None,
    tls_require_client_cert: Annotated[
        bool, typer.Option(help="Refuse TLS clients without a certificate signed by --tls-ca.")
    ] = False,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            envvar="GEAR_BROKER_DATA_DIR",
            help="Keep durable state in this directory (created if missing) and recover it at start: "
            "durable exchanges, queues and bindings, and persistent messages (delivery_mode 2) in durable "
            "queues, after a clean stop or a crash. Confirms for those are sent once they are fsynced. "
            "Message bodies are also paged here under memory pressure. Without it everything is in memory.",
            show_default=False,
        ),
    ] = None,
    prometheus_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Serve /metrics under RabbitMQ's Prometheus metric names on this port (on --bind), so one "
            "dashboard serves both brokers. Needs gear-rpc[metrics].",
            show_default=False,
        ),
    ] = None,
    management_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Serve a read-only subset of RabbitMQ's management HTTP API on this port (on --bind): "
            "queues, exchanges, bindings, as `gear prune` and `gear doctor --management-url` read them.",
            show_default=False,
        ),
    ] = None,
    prometheus_per_object: Annotated[
        bool,
        typer.Option(
            help="Queue metrics per queue (labels vhost, queue) instead of summed, like RabbitMQ's "
            "prometheus.return_per_object_metrics.",
        ),
    ] = False,
    level: LogLevelOpt = "WARNING",
) -> None:
    """Run Gear's reference broker (AMQP 0-9-1) in the foreground until Ctrl-C or SIGTERM.

    Users: guest/guest by default, from loopback only, as RabbitMQ. Add users with --user or
    --users-file (passwords are kept as salted hashes, never in plain text at rest).

    Without --data-dir everything lives in memory and is lost when it stops, even what was declared
    durable or published persistent. With --data-dir DIR, durable exchanges, queues and bindings and
    the persistent messages in durable queues are kept in DIR and recovered at the next start (after a
    stop or a crash), as RabbitMQ does; one broker per directory. It is a single node: use RabbitMQ for
    anything that must span several machines.
    """
    from gear.broker import (
        BrokerConfig,
        DefinitionsError,
        RecoveryReport,
        StoreLockedError,
        load_definitions,
        serve,
    )

    configure_logging(log_level(level))
    tls = tls_cert is not None
    options: dict[str, Any] = {"host": bind, "port": (5671 if tls else 5672) if port is None else port}
    options["tls_cert"], options["tls_key"], options["tls_ca"] = (
        None if f is None else str(f) for f in (tls_cert, tls_key, tls_ca)
    )
    options["tls_require_client_cert"] = tls_require_client_cert
    if user:
        options["users"] = dict(parse_user(u) for entry in user for u in entry.split())
    if users_file is not None:
        try:
            options["definitions"] = load_definitions(users_file)
        except DefinitionsError as exc:
            fail(str(exc), ExitCode.USAGE)
    if vhost:
        options["vhosts"] = ("/", *vhost)
    if allow_guest_remote:
        options["loopback_users"] = ()
    if memory_high_watermark is not None:
        options["memory_high_watermark"] = parse_watermark(memory_high_watermark)
    if max_connections is not None:
        options["max_connections"] = max_connections
    options["max_message_size"] = parse_size(max_message_size, "--max-message-size")
    if disk_free_limit is not None:
        options["disk_free_limit"] = parse_size(disk_free_limit, "--disk-free-limit")
    if management_port is not None:
        options["management_port"] = management_port
    if data_dir is not None:
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            fail(f"cannot use data directory {data_dir}: {exc.strerror or exc}", ExitCode.USAGE)
        options["data_dir"] = str(data_dir)
    try:
        config = BrokerConfig(**options)
    except ValueError as exc:
        fail(str(exc), ExitCode.USAGE)

    where = f"durable state in {data_dir}" if data_dir is not None else "messages in memory only"

    def ready(url: str) -> None:
        typer.echo(
            f"gear broker: listening on {mask_url(url)} (AMQP 0-9-1{' over TLS' if tls else ''}; "
            f"{where}). Ctrl-C to stop."
        )

    def recovered(report: RecoveryReport) -> None:
        typer.echo(f"gear broker: {report.summary()}")

    if prometheus_port is not None and importlib.util.find_spec("prometheus_client") is None:
        fail("--prometheus-port needs prometheus-client: pip install 'gear-rpc[metrics]'", ExitCode.USAGE)

    exporters: list[Any] = []

    def expose(running: Any) -> None:
        assert prometheus_port is not None
        exporters.append(_expose(running, prometheus_port, bind, prometheus_per_object))

    extra: dict[str, Any] = {"on_recovered": recovered} if data_dir is not None else {}
    if prometheus_port is not None:
        extra["on_started"] = expose
    try:
        gear.run(run_until_signal(serve(config, on_ready=ready, **extra)))
    except StoreLockedError as exc:
        fail(str(exc), ExitCode.USAGE)
    except ValueError as exc:  # an unusable TLS certificate or key
        fail(str(exc), ExitCode.USAGE)
    except OSError as exc:
        fail(f"cannot listen on {bind}:{options['port']}: {exc.strerror or exc}", ExitCode.CONNECT)
    finally:
        for exporter in exporters:
            exporter.close()
    typer.echo("gear broker: stopped")


def _expose(broker: Any, port: int, bind: str, per_object: bool) -> Any:
    """Serve ``broker``'s metrics on ``bind:port``, read on its event loop at each scrape."""
    from gear.broker.shell.metrics import MetricsServer

    server = MetricsServer(broker, asyncio.get_running_loop(), port, bind, per_object)
    typer.echo(f"gear broker: Prometheus metrics on http://{bind}:{server.port}/metrics")
    return server


def hash_password_command(
    stdin: Annotated[
        bool, typer.Option("--stdin", help="Read the password from the first line of standard input.")
    ] = False,
) -> None:
    """Print a salted hash of a password for a --users-file (RabbitMQ's rabbit_password_hashing_sha256).

    The password is asked for without echo (twice), or read from stdin; it is never an argument, so
    it stays out of the shell history and the process list.
    """
    from gear.broker import hash_password

    if stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        fail("refusing to hash an empty password", ExitCode.USAGE)
    typer.echo(hash_password(password))


def register(app: typer.Typer) -> None:
    """Add ``gear broker`` and ``gear hash-password`` to ``app``."""
    app.command("broker")(broker)
    app.command("hash-password")(hash_password_command)
