# make test: gofmt check, go vet, staticcheck, then the race-enabled tests,
# which start real redis-server processes (internal/redistest).

SHELL := /bin/bash

# Pinned so every machine reports the same findings.
STATICCHECK_VERSION := v0.8.2

GOBIN := $(or $(shell go env GOBIN),$(firstword $(subst :, ,$(shell go env GOPATH)))/bin)
STATICCHECK := $(GOBIN)/staticcheck

# Per test binary; a hung test fails here instead of stalling CI.
TEST_TIMEOUT ?= 8m

# Modules of their own inside this one (a go.mod in a directory below the
# root, at any depth: prom, otel, cmd/throttle, sdktest): ./... stops at
# their boundary, so make test vets, checks and tests each in its own
# directory. Found, not listed, so a new one is covered without an edit
# here; bench and the modules below it are left out: make bench runs them.
MODULES := $(sort $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod \
	-not -path './bench/*' -not -path './.git/*')))

# Dependencies the root module must not name, even indirectly: a program
# that imports only package throttle is never pushed to newer versions of
# them. Their integrations live in the modules prom and otel.
ROOT_FORBIDDEN := github.com/prometheus/|go.opentelemetry.io/|google.golang.org/protobuf

# Modules make test leaves to a target of their own. sdktest drives four
# vendor SDKs through NewClient (request counts, one refusal per call);
# compiling the SDKs (openai-go and stripe-go are large) is about two
# minutes of a cold run on 2 cores, which would put make test over the five
# minutes it is held to. make sdktest runs it (without -race: it starts no
# goroutines of its own against throttle's, whose concurrency the root
# module's race-enabled tests cover), and .ci/run runs make sdktest after
# make test, so CI runs every test.
SEPARATE_MODULES := sdktest

# The library, built and vetted again with the oldest Go its go.mod allows
# (its go directive), fetched through the module proxy, so that a newer API
# or language feature cannot creep in unnoticed. make test checks the root
# module, which every user builds: compiling Prometheus' and OTel's trees a
# second time with the old toolchain would add a minute to a cold make test
# (over the 5 minutes it is held to) for modules that share its go
# directive; `make oldestgo OLDEST_GO_MODULES=". prom otel cmd/throttle"`
# checks them all. sdktest and bench follow the SDKs' and the harness's
# needs, not the users'.
OLDEST_GO_MODULES := .

.PHONY: test sdktest browsertest redis clients staticcheck rootdeps oldestgo

test: redis clients staticcheck rootdeps oldestgo
	@echo '== gofmt'
	@out="$$(gofmt -l . 2>&1)"; if [ -n "$$out" ]; then \
		echo 'gofmt: these files are not formatted (run gofmt -w on them):'; \
		echo "$$out"; exit 1; fi
	@echo '== go vet'
	go vet ./...
	@echo '== staticcheck'
	$(STATICCHECK) ./...
	@echo '== go test: compiling the tests with -race, then running them (the compile takes a few minutes on a first run)'
	go test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	@for m in $(filter-out $(SEPARATE_MODULES),$(MODULES)); do \
		echo "== $$m (module): go vet, staticcheck, go test -race"; \
		(cd $$m && set -x && go vet ./... && $(STATICCHECK) ./... && \
			go test -race -count=1 -timeout $(TEST_TIMEOUT) ./...) || exit 1; \
	done

# The vendor SDKs' tests (see SEPARATE_MODULES).
sdktest: staticcheck
	@echo '== sdktest (module): go vet, staticcheck, go test'
	cd sdktest && go vet ./... && $(STATICCHECK) ./... && go test -count=1 -timeout $(TEST_TIMEOUT) ./...

# The status page (throttle status --serve) in a real headless browser:
# cmd/throttle's tests TestStatusPage*InBrowser, behind the build tag
# browser so that make test, which has no browser to give it, leaves it
# out rather than skipping it. As root, Debian's chromium is installed
# with apt-get when no Chromium is on PATH; .ci/run runs this target after
# make sdktest.
browsertest: redis staticcheck
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && \
		! command -v google-chrome >/dev/null 2>&1; then \
		if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
			echo 'no Chromium found: the status page test renders the page in one;'; \
			echo 'install it (Debian: sudo apt-get install chromium) or run make browsertest as root.'; \
			exit 1; \
		fi; \
		echo 'chromium not found: installing it with apt-get'; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y chromium || exit 1; \
	fi
	@echo '== cmd/throttle: the status page in headless Chromium'
	cd cmd/throttle && go vet -tags browser ./... && $(STATICCHECK) -tags browser ./... && \
		go test -tags browser -race -count=1 -timeout $(TEST_TIMEOUT) -run 'TestStatusPage.*InBrowser' .

# go vet (which type-checks the tests too) and go build of each of
# OLDEST_GO_MODULES with the toolchain its go directive names
# (GOTOOLCHAIN=go1.26.0 for the root module), downloaded once into the
# module cache.
oldestgo:
	@for m in $(OLDEST_GO_MODULES); do \
		v="$$(cd $$m && GOTOOLCHAIN=local go list -m -f '{{.GoVersion}}')" || exit 1; \
		echo "== $$m: go vet and go build with the oldest Go it supports, go$$v"; \
		[ -d "$$(go env GOMODCACHE)/golang.org/toolchain@v0.0.1-go$$v.$$(go env GOOS)-$$(go env GOARCH)" ] || \
			echo "== downloading Go $$v for the oldest-Go check (first run only, a 72 MB download; then it compiles the library with it, about a minute)"; \
		(cd $$m && set -x && GOTOOLCHAIN=go$$v go vet ./... && GOTOOLCHAIN=go$$v go build -o /dev/null ./...) || exit 1; \
	done

# The root module's build list (go list -m all: every module its packages
# and their tests can load) holds none of ROOT_FORBIDDEN.
rootdeps:
	@echo '== root module: no Prometheus, OpenTelemetry or protobuf'
	@out="$$(GOWORK=off go list -m all)" || exit 1; \
	bad="$$(grep -E '$(ROOT_FORBIDDEN)' <<<"$$out")"; \
	if [ -n "$$bad" ]; then \
		echo 'the root go.mod must not require these (move the code needing them to a module of its own):'; \
		echo "$$bad"; exit 1; fi

# Internal helper: make sure redis-server is on PATH. As root it is installed
# with apt-get; Debian's package starts a system redis on 6379, which the tests
# do not use (each test starts its own on a free port), so it is stopped and
# disabled again.
redis:
	@if command -v redis-server >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo 'redis-server not found in PATH. The tests start real Redis servers;'; \
		echo 'install it (Debian/Ubuntu: sudo apt-get install redis-server) or run make test as root.'; \
		exit 1; \
	fi; \
	echo 'redis-server not found: installing it with apt-get'; \
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server || exit 1; \
	if [ -d /run/systemd/system ]; then \
		systemctl disable --now redis-server.service || true; \
	elif [ -x /etc/init.d/redis-server ]; then \
		/etc/init.d/redis-server stop || true; \
		update-rc.d redis-server disable || true; \
	fi; \
	command -v redis-server >/dev/null || { echo 'redis-server still not in PATH after install'; exit 1; }

# Internal helper: the proxy's end-to-end tests (cmd/throttle) send through
# curl and Python's requests, and fail when they are missing. As root they
# are installed with apt-get (Debian's curl and python3-requests, which
# brings python3); otherwise make says what to install.
clients:
	@missing=; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	{ python3 -c 'import requests' || /usr/bin/python3 -c 'import requests'; } >/dev/null 2>&1 || missing="$$missing python3-requests"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "missing:$$missing. The proxy's tests send through curl and Python's requests;"; \
		echo "install them (Debian/Ubuntu: sudo apt-get install$$missing) or run make test as root."; \
		exit 1; \
	fi; \
	echo "missing:$$missing: installing with apt-get"; \
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing || exit 1; \
	command -v curl >/dev/null || { echo 'curl still not in PATH after install'; exit 1; }; \
	/usr/bin/python3 -c 'import requests' || { echo "/usr/bin/python3 still cannot import requests after installing python3-requests"; exit 1; }

# Installs staticcheck $(STATICCHECK_VERSION) into $(GOBIN) unless that exact
# version is already there.
staticcheck:
	@if [ -x "$(STATICCHECK)" ] && go version -m "$(STATICCHECK)" | \
		grep -Eq '^[[:space:]]+mod[[:space:]]+honnef.co/go/tools[[:space:]]+$(STATICCHECK_VERSION)([[:space:]]|$$)'; then \
		exit 0; fi; \
	echo '== installing staticcheck $(STATICCHECK_VERSION) into $(GOBIN) (first run only, about 30 s)'; \
	GOBIN="$(GOBIN)" go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# make bench: the fleet load harness (bench/, a module of its own): every
# scenario with throttle and the alternatives, N worker processes sharing a
# redis-server it starts on loopback, then what throttle proxy adds per
# request (scenario proxy). Writes bench/results/REPORT.md and SVG plots;
# about 9 minutes on 2 cores. BENCH_FLAGS passes flags, e.g.
# BENCH_FLAGS='-scenarios steady -algos throttle'.
.PHONY: bench
bench: redis
	cd bench && go run ./cmd/fleetbench -out results $(BENCH_FLAGS)
