"""Tests of the sans-I/O AMQP client core (``gear.amqp``)."""
