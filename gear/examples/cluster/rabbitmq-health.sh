#!/bin/bash
# docker-compose.yml's health check of a RabbitMQ node, mounted into each RabbitMQ container:
#
#   gear-rabbitmq-health [MEMBERS]
#
# Healthy when a client logs in the way the Gear services do: by the container's hostname, so over its
# network address and not localhost, at RABBITMQ_NODE_PORT (5672), as guest:guest
# (RABBITMQ_DEFAULT_USER/PASS if set), AMQP 0-9-1 up to connection.open-ok on vhost "/". A guest
# confined to localhost (loopback_users), a wrong password or a missing vhost make it fail, and it
# says why. With MEMBERS, the node's cluster must also have that many members (the management API's
# node list on port 15672, running or not): a node that gave up on peer discovery and booted alone
# has one. Only bash, dd, od and base64 run (in the official image and in the images of
# scripts/debian_images.py alike), no Erlang VM, so checking every few seconds costs next to nothing.
set -euo pipefail

members=${1:-}
host=${HOSTNAME:-$(cat /proc/sys/kernel/hostname)}
port=${RABBITMQ_NODE_PORT:-5672}
user=${RABBITMQ_DEFAULT_USER:-guest}
password=${RABBITMQ_DEFAULT_PASS:-guest}
vhost=/

bytes() { local x; for x; do printf '\\x%02x' "$x"; done; }          # numbers -> printf escapes
text() { local i; for ((i = 0; i < ${#1}; i++)); do printf '\\x%02x' "'${1:i:1}"; done; }
u32() { bytes $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
shortstr() { bytes ${#1}; text "$1"; }

send_method() {  # send_method CLASS METHOD ARGUMENT-ESCAPES: one method frame on channel 0
    local payload
    payload="$(bytes 0 "$1" 0 "$2")$3"
    printf "$(bytes 1 0 0)$(u32 $((${#payload} / 4)))${payload}$(bytes 206)" >&3
}

reply=()
read_method() {  # the next frame's bytes into reply (class, method, arguments...); fails if cut short
    local -a head
    head=($(dd bs=1 count=7 <&3 2>/dev/null | od -An -tu1 -v))
    ((${#head[@]} == 7)) || return 1
    local size=$((head[3] << 24 | head[4] << 16 | head[5] << 8 | head[6]))
    reply=($(dd bs=1 count=$((size + 1)) <&3 2>/dev/null | od -An -tu1 -v))
    ((${#reply[@]} == size + 1))
}

expect() {  # expect CLASS METHOD WHAT: the next frame is that method, else say what came instead
    if ! read_method; then
        echo "unhealthy: the connection closed while waiting for $3 (login of '$user' at $host:$port)"
        exit 1
    fi
    local class=$((reply[0] << 8 | reply[1])) method=$((reply[2] << 8 | reply[3]))
    if ((class == 10 && method == 50)); then
        local code=$((reply[4] << 8 | reply[5])) why="" i
        for ((i = 0; i < reply[6]; i++)); do why+=$(printf "\\x$(printf %02x "${reply[7 + i]}")"); done
        echo "unhealthy: $code $why (login of '$user' at $host:$port)"
        exit 1
    fi
    if ((class != $1 || method != $2)); then
        echo "unhealthy: got method $class.$method instead of $3"
        exit 1
    fi
}

exec 3<>"/dev/tcp/$host/$port"
printf 'AMQP\x00\x00\x09\x01' >&3
expect 10 10 connection.start
# client properties: a connection name for the broker's log, and the capability that makes a refused
# login come back as connection.close with the reason instead of a bare disconnect
capabilities="$(shortstr authentication_failure_close)$(text t)$(bytes 1)"
properties="$(shortstr connection_name)$(text S)$(u32 11)$(text gear-health)"
properties+="$(shortstr capabilities)$(text F)$(u32 $((${#capabilities} / 4)))${capabilities}"
plain=$((2 + ${#user} + ${#password}))
send_method 10 11 "$(u32 $((${#properties} / 4)))${properties}$(shortstr PLAIN)$(u32 $plain)$(bytes 0)$(text "$user")$(bytes 0)$(text "$password")$(shortstr en_US)"
expect 10 30 connection.tune
send_method 10 31 "$(bytes "${reply[@]:4:6}" 0 0)"  # the broker's channel-max and frame-max; no heartbeats
send_method 10 40 "$(shortstr "$vhost")$(bytes 0 0)"
expect 10 41 connection.open-ok
send_method 10 50 "$(bytes 0 200 0 0 0 0 0)"
expect 10 51 connection.close-ok
exec 3>&-

if [ -n "$members" ]; then
    exec 4<>"/dev/tcp/$host/15672"
    auth=$(printf '%s:%s' "$user" "$password" | base64 -w0)
    printf 'GET /api/nodes?columns=name HTTP/1.0\r\nHost: %s\r\nAuthorization: Basic %s\r\n\r\n' \
        "$host" "$auth" >&4
    nodes=$(cat <&4 | grep -o '"name":"[^"]*"' | sort -u | wc -l) || true
    exec 4>&-
    if [ "$nodes" != "$members" ]; then
        echo "unhealthy: $nodes cluster member(s), not $members"
        exit 1
    fi
fi
echo "healthy: '$user' logs in at $host:$port${members:+; $members cluster members}"
