# xhrpcd in a container: the build stage installs the same -dev packages as `make deps`
# and builds release; the runtime stage is Debian slim with the shared libraries only.
# The server listens on a Unix socket in the /run/xhrpc volume; share that volume with
# the client containers. The image carries the xhrpc command too (`docker exec ... xhrpc
# --socket /run/xhrpc/xhrpc.sock call server.info`). Persistent cookies are kept in the /var/lib/xhrpc volume. The
# egress policy is the default one (loopback and private ranges denied): add --allow
# patterns for the internal hosts the clients may reach.

FROM swift:6.3.1-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      pkg-config libuv1-dev libcurl4-openssl-dev libyajl-dev libssl-dev libwslay-dev libjemalloc-dev \
      zlib1g-dev libbrotli-dev libzstd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Plugins ./Plugins
COPY Benchmarks ./Benchmarks
COPY Tests ./Tests
COPY api ./api
COPY examples ./examples
# The Makefile's RELEASE_FLAGS: no runtime exclusivity checks, lld, packed relocations,
# Benchmarks/link-order.txt.
ARG RELEASE_FLAGS="--static-swift-stdlib -Xswiftc -enforce-exclusivity=unchecked -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --symbol-ordering-file=/src/Benchmarks/link-order.txt -Xlinker --no-warn-symbol-ordering"
# hadolint ignore=SC2086
RUN swift build -c release --product xhrpcd $RELEASE_FLAGS \
 && swift build -c release --product xhrpc $RELEASE_FLAGS \
 && cp "$(swift build -c release --show-bin-path)/xhrpcd" "$(swift build -c release --show-bin-path)/xhrpc" /usr/local/bin/

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libuv1 libcurl4 libyajl2 libssl3 libwslay1 libjemalloc2 zlib1g libbrotli1 libzstd1 ca-certificates socat \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 xhrpc \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin xhrpc \
 && mkdir -p /run/xhrpc /var/lib/xhrpc && chown xhrpc:xhrpc /run/xhrpc /var/lib/xhrpc \
 && chmod 0700 /var/lib/xhrpc
COPY --from=build /usr/local/bin/xhrpcd /usr/local/bin/xhrpc /usr/local/bin/
USER 10001:10001
VOLUME ["/run/xhrpc", "/var/lib/xhrpc"]
# /healthz of the operations listener on loopback (--http-listen below; the example
# service config listens on 0.0.0.0:9090, which loopback reaches too), asked with socat.
HEALTHCHECK --interval=30s --timeout=3s --retries=3 \
  CMD ["/bin/sh", "-c", "printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n' | socat -t 2 - TCP:127.0.0.1:9090 | head -n 1 | grep -q ' 200 '"]
ENTRYPOINT ["/usr/local/bin/xhrpcd"]
# `docker stop` sends SIGKILL 10 s after SIGTERM: the drain ends by 8 s, leaving time to
# flush replies (up to 1 s) and save the cookies.
CMD ["--listen", "unix:/run/xhrpc/xhrpc.sock", "--socket-mode", "0660", "--state-dir", "/var/lib/xhrpc", \
     "--drain-seconds", "8", "--http-listen", "tcp:127.0.0.1:9090"]
