# syntax=docker/dockerfile:1
# admit's container image: a static binary on an empty base, run as UID 65532, with no shell.
# Run it with a read-only root filesystem: it writes nothing.
#   docker build -t admit . && docker run --rm --read-only -p 8080:8080 admit
# Without Docker, make image writes the same image (deploy/image) to bin/admit-image.tar.
# Only the final stage's ARG, ENV, LABEL, USER, WORKDIR, EXPOSE, COPY, ENTRYPOINT and CMD lines
# make the image there, so every other instruction belongs to the build stage.
# No test runs the build stage: it pulls docker.io/library/golang:1.26, and the test machine
# reaches no registry (podman build stops there). The tests check the final stage against
# make image, and the build stage's go build line and Go version against the Makefile's release
# build and go.mod (deploy/image, TestBuildStage). The name is fully qualified so that podman
# and buildah, which resolve no short name by default, build it too.

FROM docker.io/library/golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=auto -ldflags='-s -w' -o /out/admit ./cmd/admit

FROM scratch
ARG VERSION=dev
COPY --from=build /out/admit /admit
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /
# admit serve listens on every interface; the gRPC and admin listeners keep their flags.
ENV ADMIT_LISTEN=:8080
# HTTP (and /metrics), Envoy's rate limit service (gRPC), the admin API.
EXPOSE 8080/tcp 8081/tcp 8082/tcp
LABEL org.opencontainers.image.title="admit" \
      org.opencontainers.image.description="Distributed rate limiting on Redis" \
      org.opencontainers.image.source="https://github.com/admit-dev/admit" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/admit"]
# The demo on memory: 3 requests per 10 s on GET /demo.
CMD ["serve"]
