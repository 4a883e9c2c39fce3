# crawlworker: a worker image. Build from the repository root:
#
#     docker build -t crawlworker .
#     docker run --rm -e CRAWLWORKER_REDIS_URL=redis://redis:6379 \
#         -v "$PWD/spiders:/etc/crawlworker/spiders:ro" crawlworker run spiders/bbs.toml
#
# Configuration comes from the environment (CRAWLWORKER_<SETTING>, e.g.
# CRAWLWORKER_REDIS_URL, CRAWLWORKER_CONCURRENT_REQUESTS), spiders are
# mounted (or copied in a derived image) under /etc/crawlworker/spiders.
#
# The default target compiles the binary in rust:1-bookworm. Where that
# image cannot be pulled, build the binary on the host and copy it in
# (scripts/container-image does this with podman):
#
#     cargo build --release --locked -p crawlworker
#     docker build --target prebuilt -t crawlworker .
#
# With Chromium (rules with `render`): --target runtime-chromium, or
# prebuilt-chromium for a binary built on the host.
#
# BASE_IMAGE names the Debian bookworm image the runtime starts from.

ARG BASE_IMAGE=debian:bookworm-slim

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p crawlworker \
    && cp target/release/crawlworker /crawlworker

# The CA certificates alone: the bundle, without the openssl and libssl3
# that the ca-certificates package brings to make it (the worker uses
# rustls).
FROM ${BASE_IMAGE} AS certificates
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates

FROM ${BASE_IMAGE} AS runtime-base
COPY --from=certificates /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY spiders /etc/crawlworker/spiders
COPY config /etc/crawlworker/config
# Readable by the worker's user whatever the checkout's umask was.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /etc/crawlworker \
        --shell /usr/sbin/nologin crawlworker \
    && chmod -R a+rX /etc/crawlworker /etc/ssl/certs
WORKDIR /etc/crawlworker
USER crawlworker
# Metrics and health on every interface of the container; JSON logs for
# log shippers.
ENV CRAWLWORKER_METRICS_ADDR=0.0.0.0:9410 \
    CRAWLWORKER_LOG_FORMAT=json
EXPOSE 9410
# The first SIGTERM finishes downloads in progress (shutdown_grace, 30 s by
# default) and hands every other request back to the queue at once; give
# the container longer than that before it is killed
# (`docker stop -t 45`, compose's stop_grace_period: 45s).
STOPSIGNAL SIGTERM
# Unhealthy when the worker does not answer, or has not reached Redis for
# three heartbeats (15 s).
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["crawlworker", "health"]
ENTRYPOINT ["crawlworker"]
CMD ["run", "spiders/bbs.toml"]

# A binary built on the host (target/release/crawlworker).
FROM runtime-base AS prebuilt
COPY --chmod=0755 target/release/crawlworker /usr/local/bin/crawlworker

# With Chromium, for spiders whose rules render pages built by JavaScript
# (docs/rendering.md): Debian's chromium, found on PATH by the worker.
# Without user namespaces in the container, Chromium's sandbox cannot
# start: Debian's chromium wrapper reads CHROMIUM_FLAGS, and the
# container is the sandbox. Tag it apart (crawlworker:chromium): it is
# some 400 MB larger.
FROM runtime-base AS chromium-base
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium fonts-liberation \
    && rm -rf /var/lib/apt/lists/*
USER crawlworker
ENV CHROMIUM_FLAGS=--no-sandbox

FROM chromium-base AS prebuilt-chromium
COPY --chmod=0755 target/release/crawlworker /usr/local/bin/crawlworker

FROM chromium-base AS runtime-chromium
COPY --from=build /crawlworker /usr/local/bin/crawlworker

# The default: the binary compiled in the build stage.
FROM runtime-base AS runtime
COPY --from=build /crawlworker /usr/local/bin/crawlworker
