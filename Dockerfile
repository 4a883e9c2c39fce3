# crawlworker: a worker image. Build from the repository root:
#
#     docker build -t crawlworker .
#     docker run --rm -e CRAWLWORKER_REDIS_URL=redis://redis:6379 \
#         -v "$PWD/spiders:/etc/crawlworker/spiders:ro" crawlworker run spiders/bbs.toml
#
# Configuration comes from the environment (CRAWLWORKER_<SETTING>, e.g.
# CRAWLWORKER_REDIS_URL, CRAWLWORKER_CONCURRENT_REQUESTS), spiders are
# mounted (or copied in a derived image) under /etc/crawlworker/spiders.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p crawlworker \
    && cp target/release/crawlworker /crawlworker

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /etc/crawlworker crawlworker
COPY --from=build /crawlworker /usr/local/bin/crawlworker
COPY spiders /etc/crawlworker/spiders
COPY config /etc/crawlworker/config
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
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["crawlworker", "health"]
ENTRYPOINT ["crawlworker"]
CMD ["run", "spiders/bbs.toml"]
