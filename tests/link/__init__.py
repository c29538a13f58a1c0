"""Tests of the link's asyncio shell (``gear.link``), without a socket."""
