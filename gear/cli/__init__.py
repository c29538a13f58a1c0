"""The `gear` command line: a thin typer layer over the SDK, the reference broker and the examples."""

__all__: tuple[str, ...] = ()
