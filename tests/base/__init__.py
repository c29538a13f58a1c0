"""Tests of the SDK's vocabulary (``gear.base``) and the event loop: pure parts, without sockets."""
