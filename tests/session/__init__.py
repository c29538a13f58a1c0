"""The session's tests (``gear.session``): the connector, the publisher, its retries, hedging, the probe."""
