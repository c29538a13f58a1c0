"""Client conformance: the same behaviour tests against the reference broker and RabbitMQ."""
