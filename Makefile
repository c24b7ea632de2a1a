# The README's two commands are `make run` and `make test`.

GO        ?= go
LISTEN    ?= 127.0.0.1:8080
BENCHTIME ?= 2s
COUNT     ?= 1

.PHONY: run test vet bench build image dist check-redis test-deps pictures

## run: start `admit serve` on the embedded in-memory backend (set REDIS_URL to use Redis).
run:
	$(GO) run ./cmd/admit serve --listen $(LISTEN)

## build: build the admit binary into ./bin.
build:
	$(GO) build -o bin/admit ./cmd/admit

## test: go vet, then every test with the race detector, Redis tests against real redis-server; then
## the compatibility tests (compat/, a module of its own: admit against go-redis/redis_rate;
## compat/envoyrl, one of its own: admit serve against envoyproxy/ratelimit's service, live) and the
## image's (deploy/image, a module of its own: make image, run in podman; make dist), the Helm chart's
## (deploy/helm), the Envoy, Istio and Envoy Gateway configurations' (deploy/envoy) and the Prometheus
## rules' and Grafana dashboard's (deploy/prometheus: promtool, a live admit) and the operator console's
## (transport/admin/uitest: chromium, a live admit), each a module of its own, each even when one
## before failed; it fails if any did.
test: check-redis vet
	status=0; ADMIT_REQUIRE_REDIS=1 $(GO) test -race -count=1 ./... || status=1; \
	(cd compat && ADMIT_REQUIRE_REDIS=1 $(GO) test -race -count=1 ./...) || status=1; \
	(cd compat/envoyrl && ADMIT_REQUIRE_REDIS=1 $(GO) test -race -count=1 ./...) || status=1; \
	(cd deploy/image && ADMIT_REQUIRE_REDIS=1 $(GO) test -race -count=1 ./...) || status=1; \
	(cd deploy/helm && $(GO) test -race -count=1 ./...) || status=1; \
	(cd deploy/envoy && $(GO) test -race -count=1 ./...) || status=1; \
	(cd deploy/prometheus && ADMIT_REQUIRE_REDIS=1 $(GO) test -race -count=1 ./...) || status=1; \
	(cd transport/admin/uitest && ADMIT_REQUIRE_REDIS=1 $(GO) test -race -count=1 ./...) || status=1; \
	exit $$status

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd compat && $(GO) vet ./...
	cd compat/envoyrl && $(GO) vet ./...
	cd deploy/image && $(GO) vet ./...
	cd deploy/helm && $(GO) vet ./...
	cd deploy/envoy && $(GO) vet ./...
	cd deploy/prometheus && $(GO) vet ./...
	cd transport/admin/uitest && $(GO) vet ./...

# The release build of admit: static, without local paths, stamped with the commit (admit version
# reads it from the build info; -buildvcs=auto overrides a GOFLAGS of -buildvcs=false).
RELEASE_BUILD = CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags='-s -w'

# The image's settings: its architecture (this machine's), its version label, its name in the
# tarball, the CA bundle it carries, and where the binary and the tarball go.
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_TAG  ?= admit:latest
CA_BUNDLE  ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_BIN  ?= bin/admit-linux-$(IMAGE_ARCH)
IMAGE_TAR  ?= bin/admit-image.tar

## image: write admit's container image, the Dockerfile's without Docker, to bin/admit-image.tar
## (podman load -i bin/admit-image.tar, or docker load; then podman run -p 8080:8080 admit).
image:
	GOOS=linux GOARCH=$(IMAGE_ARCH) $(RELEASE_BUILD) -o $(abspath $(IMAGE_BIN)) ./cmd/admit
	cd deploy/image && $(GO) run . -dockerfile $(CURDIR)/Dockerfile -arch $(IMAGE_ARCH) \
	    -build-arg VERSION=$(VERSION) -tag $(IMAGE_TAG) -o $(abspath $(IMAGE_TAR)) \
	    -file /admit=$(abspath $(IMAGE_BIN)) -file /etc/ssl/certs/ca-certificates.crt=$(abspath $(CA_BUNDLE))

DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
DIST_DIR       ?= dist

## dist: cross-build the static admit of each of DIST_PLATFORMS into DIST_DIR (dist) as admit-OS-ARCH,
## with their SHA-256 sums in DIST_DIR/SHA256SUMS (sha256sum -c SHA256SUMS checks them).
dist:
	rm -rf $(DIST_DIR) && mkdir -p $(DIST_DIR)
	for p in $(DIST_PLATFORMS); do \
	    GOOS=$${p%/*} GOARCH=$${p#*/} $(RELEASE_BUILD) -o $(abspath $(DIST_DIR))/admit-$${p%/*}-$${p#*/} ./cmd/admit || exit 1; \
	done
	cd $(DIST_DIR) && if command -v sha256sum >/dev/null; then sha256sum admit-*; else shasum -a 256 admit-*; fi >SHA256SUMS
	cat $(DIST_DIR)/SHA256SUMS

## check-redis: the programs the tests run, installed when missing (test-deps).
check-redis: test-deps

## test-deps: install the test programs of scripts/test-programs.txt that are missing, from Debian's
## packages (through sudo when not root) on Debian or Ubuntu, printing each command first;
## ADMIT_NO_INSTALL=1 refuses instead, printing the install line, as on any other system
## (scripts/test-deps.sh).
test-deps:
	@sh scripts/test-deps.sh

## bench: run the benchmarks against harness-started redis-servers and write BENCHMARKS.md and
## docs/bench-throughput.svg (scripts/bench.sh; BENCHTIME=5s COUNT=3 make bench runs longer).
bench: check-redis
	BENCHTIME=$(BENCHTIME) COUNT=$(COUNT) ./scripts/bench.sh

## pictures: redraw docs/algorithms.svg from internal/algo (a test fails while the checked-in file is stale)
## and its copy the console serves, and take docs/console.png, the operator console in chromium (transport/admin/uitest, ADMIT_PICTURES=1).
pictures:
	$(GO) run ./internal/tools/algopicture -o docs/algorithms.svg
	cp docs/algorithms.svg transport/admin/console/algorithms.svg
	cd transport/admin/uitest && ADMIT_PICTURES=1 ADMIT_REQUIRE_REDIS=1 $(GO) test -count=1 -run 'TestConsole$$' ./...
