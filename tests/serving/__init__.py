"""The serving side's tests (``gear.serving``): handlers, duplicates, dead letters, draining stops."""
