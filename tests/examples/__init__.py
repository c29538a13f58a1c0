"""Tests of the example services, the demo and the compose file."""
