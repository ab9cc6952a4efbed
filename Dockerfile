# Baton: a static binary on a small Debian runtime that has what the agent's
# tools need (bash, git, coreutils, bubblewrap for the Bash sandbox, curl for
# the hosts egress.allow opens).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/baton ./bot

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash git coreutils ca-certificates bubblewrap curl \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 10001 --shell /bin/bash baton \
 && mkdir -p /data/data \
 && chown -R baton:baton /data
COPY --from=build /out/baton /usr/local/bin/baton
# The default paths resolve against the working directory, so the defaults
# find the pieces at /data/configs/pieces and keep state in /data/data (mount
# a volume there). Paths a config file writes resolve against its directory:
# mount one at /data/baton.yaml to keep the same meaning.
COPY configs/ /data/configs/
WORKDIR /data
USER baton
VOLUME ["/data/data"]
EXPOSE 8080
# The health check needs no curl: bash's /dev/tcp asks /healthz on the default
# http.addr (127.0.0.1:8080). Change the port here if you move http.addr, or
# to admin.addr's port when that is set (health moves there).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["baton"]
CMD ["serve"]
