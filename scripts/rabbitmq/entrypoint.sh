#!/bin/sh
# Entrypoint of the local RabbitMQ image (scripts/debian_images.py): one node in the foreground, logging
# to stdout. It is configured with RabbitMQ's own variables, so that several nodes can share a host
# network with each other and with the host's own RabbitMQ (the test backend sets all of them):
#   RABBITMQ_NODE_PORT          AMQP port (5672 when unset)
#   RABBITMQ_NODE_IP_ADDRESS    address the AMQP listener binds (all when unset)
#   RABBITMQ_NODENAME           node name (the image sets rabbit@localhost)
#   RABBITMQ_DIST_PORT          Erlang distribution port (AMQP port + 20000 when unset)
#   ERL_EPMD_PORT, ERL_EPMD_ADDRESS   the port and address of this node's own epmd
set -eu

# A fresh Erlang cookie per container: the image holds none, and no two containers share one.
cookie=/var/lib/rabbitmq/.erlang.cookie
rm -f "$cookie"
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$cookie")
chown rabbitmq:rabbitmq "$cookie"

cd /var/lib/rabbitmq
export HOME=/var/lib/rabbitmq
exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups /usr/lib/rabbitmq/bin/rabbitmq-server "$@"
