# amqp-gateway on Debian 12 slim, as a non-root user, with a healthcheck through `ping`.
#   docker build -t amqp-gateway .
#   docker run -p 5672:5672 -p 9419:9419 -v amqp-gateway:/var/lib/amqp-gateway amqp-gateway
# The virtual environment is built at its final path in a build stage (python-qpid-proton
# is compiled there) and copied into a runtime stage without a compiler; the same layout
# as the Debian package (/opt/amqp-gateway/venv). PySpark is left out, as in the package:
# `amqp-gateway report` says how to add it. See deploy/README.md, "The container image".
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv python3.11-dev gcc libssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY addressing ./addressing
COPY translators ./translators
COPY gateway ./gateway
COPY pipeline ./pipeline
RUN python3.11 -m venv /opt/amqp-gateway/venv \
 && /opt/amqp-gateway/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check . \
 && /opt/amqp-gateway/venv/bin/python -m pip uninstall --yes pip setuptools \
 && /opt/amqp-gateway/venv/bin/python -m compileall -q /opt/amqp-gateway/venv/lib

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.11 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system amqp-gateway \
 && useradd --system --gid amqp-gateway --home-dir /var/lib/amqp-gateway --shell /usr/sbin/nologin amqp-gateway \
 && install -d -o amqp-gateway -g amqp-gateway -m 0750 /var/lib/amqp-gateway \
 && install -d -o root -g amqp-gateway -m 0750 /etc/amqp-gateway
COPY --from=build /opt/amqp-gateway /opt/amqp-gateway
COPY --chown=root:amqp-gateway --chmod=0640 deploy/docker/config.yaml /etc/amqp-gateway/config.yaml
RUN ln -s /opt/amqp-gateway/venv/bin/amqp-gateway /usr/bin/amqp-gateway
USER amqp-gateway
WORKDIR /var/lib/amqp-gateway
VOLUME /var/lib/amqp-gateway
EXPOSE 5672 9419
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["amqp-gateway", "ping", "--config", "/etc/amqp-gateway/config.yaml", "--timeout", "3"]
ENTRYPOINT ["amqp-gateway"]
CMD ["run", "--config", "/etc/amqp-gateway/config.yaml"]
