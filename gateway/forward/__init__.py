"""Forwarding to other containers: the ``amqp$transfer`` service, the outbox per remote
container, the forwarders that drain it, dedupe and static routes (see DESIGN.md,
"Durability and forwarding"). Sans-I/O: the edge opens the outbound sockets."""
