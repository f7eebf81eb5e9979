#!/bin/sh
# Build the benchmark load generators into $1 (default: bench/build).
# Needs gcc, pkg-config, librabbitmq-dev and libqpid-proton11-dev (Debian).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/../build"}
mkdir -p "$out"
CFLAGS="-O2 -g -Wall -Wextra -Wno-unused-parameter -Wno-unused-function -pthread"
gcc $CFLAGS -o "$out/amqp091_load" "$here/amqp091_load.c" $(pkg-config --cflags --libs librabbitmq)
gcc $CFLAGS -o "$out/amqp10_load" "$here/amqp10_load.c" \
    $(pkg-config --cflags --libs libqpid-proton-core libqpid-proton-proactor 2>/dev/null || pkg-config --cflags --libs libqpid-proton)
echo "built $out/amqp091_load $out/amqp10_load"
