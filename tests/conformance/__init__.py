"""Client conformance: the same behaviour tests against the reference broker and RabbitMQ.

Every test takes the parametrized ``broker`` fixture (through ``amqp`` or directly), so each rule runs on
``reference`` (gear.broker, in-process) and ``rabbitmq`` (GEAR_TEST_AMQP_URL). RabbitMQ is the truth: a
test that fails only on ``reference`` names the broker rule that is broken.

    GEAR_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/ pytest tests/conformance
    pytest tests/conformance -k reference      # the reference broker only

Where RabbitMQ versions differ, the tests branch on ``broker.kind``: the RabbitMQ here is 3.10, the
reference broker follows 3.13/4.x semantics. The differences encoded:

* unknown exchange type: 503 COMMAND_INVALID connection error (3.x) vs 406 channel error (4.0+, reference);
* a stray client ``basic.cancel-ok``: 503 connection error (up to 4.2) vs ignored (4.3+, reference);
* a bad protocol header: RabbitMQ 3.x and the reference answer ``AMQP 0-9-1`` for any header; 4.x answers
  non-``AMQP 0 0 9 x`` headers with the AMQP 1.0 header (not exercised here);
* a tune-ok below frame_max 4096: 3.10 closes the socket, newer brokers may send 530 first (both accepted);
* a 17 MiB message: accepted by 3.x (max_message_size 128 MiB) vs 406 (4.0+ default 16 MiB, reference);
* ``basic.qos(global=True)``: shared per channel up to 4.2 (tested), per consumer on 4.3 by default.
"""
