# A minimal image: build the static-ish binary, ship it with the example
# spiders and config. (Hardening and a distroless base come with the
# operations work.)
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p crawlworker

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/crawlworker /usr/local/bin/crawlworker
COPY spiders /etc/crawlworker/spiders
COPY config /etc/crawlworker/config
WORKDIR /etc/crawlworker
USER nobody
ENTRYPOINT ["crawlworker"]
CMD ["check", "spiders/bbs.toml"]
