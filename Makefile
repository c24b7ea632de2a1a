# The README's two commands are `make run` and `make test`.

GO        ?= go
LISTEN    ?= 127.0.0.1:8080
BENCHTIME ?= 2s
COUNT     ?= 1

.PHONY: run test vet bench build check-redis test-deps pictures

## run: start `admit serve` on the embedded in-memory backend (set REDIS_URL to use Redis).
run:
	$(GO) run ./cmd/admit serve --listen $(LISTEN)

## build: build the admit binary into ./bin.
build:
	$(GO) build -o bin/admit ./cmd/admit

## test: go vet, then every test with the race detector, Redis tests against real redis-server; then
## the compatibility tests (compat/, a module of its own: admit against go-redis/redis_rate), even when
## the first failed; then the Helm chart's tests (deploy/helm, a module of its own); it fails if any did.
test: check-redis vet
	status=0; ADMIT_REQUIRE_REDIS=1 $(GO) test -race -count=1 ./... || status=1; \
	(cd compat && ADMIT_REQUIRE_REDIS=1 $(GO) test -race -count=1 ./...) || status=1; \
	(cd deploy/helm && $(GO) test -race -count=1 ./...) || status=1; \
	exit $$status

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd compat && $(GO) vet ./...
	cd deploy/helm && $(GO) vet ./...

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

## pictures: redraw docs/algorithms.svg from internal/algo (a test fails while the checked-in file is stale).
pictures:
	$(GO) run ./internal/tools/algopicture -o docs/algorithms.svg
