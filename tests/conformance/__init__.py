"""Client conformance: the same behaviour tests against the reference broker and RabbitMQ.

Every test takes the parametrized ``broker`` fixture (through ``amqp`` or directly), so each rule runs on
``reference`` (gear.broker, in-process) and ``rabbitmq`` (GEAR_TEST_AMQP_URL, or a container). RabbitMQ
is the truth: a test that fails only on ``reference`` names the broker rule that is broken.

    GEAR_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/ pytest tests/conformance
    pytest tests/conformance -k reference      # the reference broker only

Where RabbitMQ releases differ, a test asserts the behaviour of the release it talks to:
``broker.semantics`` is RabbitMQ's own (major, minor) from its ``connection.start``, and for the
reference broker ``REFERENCE_SEMANTICS`` (4.0): it follows RabbitMQ 4.0 where releases differ, with two
exceptions of its own (marked *). Measured on RabbitMQ 3.10.8 (the system node here), 4.0.5 (Debian
trixie) and 4.3.6 (Debian forky); 4.1 and 4.2 were not measured, and the tests hold them to 4.0's rules:

============================  ===============  ===============  ===============  ==============
behaviour                     3.x              4.0              4.3              reference
============================  ===============  ===============  ===============  ==============
unknown exchange type         503, connection  406, channel     406, channel     406, channel
default max_message_size      128 MiB          16 MiB           16 MiB           16 MiB
max_message_size set at run   takes effect     ignored (read    ignored          a BrokerConfig
time (``set_env``)                             once at boot)                     field
a bad protocol header         0-9-1 header     AMQP 1.0 header  AMQP 1.0 header  0-9-1 header *
``basic.qos(global=True)``    per channel      per channel      per consumer     per channel
                                                                (denied)
stray ``basic.cancel-ok``     503, connection  503, connection  541, connection  ignored *
passive ``queue.declare``,   no permission    no permission    configure        no permission
``exchange.declare``
============================  ===============  ===============  ===============  ==============

(*) The reference broker speaks AMQP 0-9-1 only, so it offers that header (the 0-9-1 spec's rule); a
stray ``cancel-ok`` does no harm there, so it is ignored rather than closing the connection.
Other rules are the same on every release tested. A tune-ok below frame_max 4096: 3.10 closes the
socket, newer brokers may send 530 first (both accepted).
"""
