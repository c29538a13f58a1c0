"""Tests of the `gear` command line."""
