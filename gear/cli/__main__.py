"""``python -m gear.cli``: the ``gear`` command."""

from gear.cli.main import main

__all__ = ("main",)

main()
