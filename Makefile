# bex — see README.md. Every target installs or builds what it needs itself.

SHELL := /usr/bin/env bash
GO ?= go
# Kubernetes versions make test needs (the MVP tests pair the two).
TEST_KUBE_VERSIONS ?= 1.36.3,1.37.2
# go test's flags for make test; empty: hack/test.sh's (and why there).
GOTEST_FLAGS ?=
# make run has Cluster API manage the platform's own control plane
# (--managed-control-plane); MANAGED_PLANE=0 runs it on its own
# kube-apiserver, as --no-local-fleet needs.
MANAGED_PLANE ?= 1
# More flags for make run's bex-embedded (bin/bex-embedded --help).
RUN_FLAGS ?=

.PHONY: all run test fuzz test-upgrade test-continuity build images kubebin generate generate-install-crds verify bench-push bench-edge bench-apps bench-placement fmt vet clean

all: build

## run: the whole platform, embedded, on this machine (foreground; Ctrl-C stops it)
run: build
	bash hack/ensure-sandbox-tools.sh
	bash hack/ensure-host-limits.sh
	bin/bex-embedded --state-dir .bex $(if $(filter 1,$(MANAGED_PLANE)),--managed-control-plane) $(RUN_FLAGS)

## build: every binary into bin/
build:
	@mkdir -p bin
	$(GO) build -o bin/ ./cmd/...

## images: build the chart's component images and push them to REGISTRY (docs/images.md); bex-git and bex-build-agent need TOOLCHAIN_BASE
REGISTRY ?=
TAG ?=
PLATFORMS ?= linux/amd64
COMPONENTS ?=
TOOLCHAIN_BASE ?=
STATIC_BASE ?=
INSECURE ?=
IMAGES_FLAGS ?=
images:
	$(GO) run ./cmd/bex-images --registry "$(REGISTRY)" --platform "$(PLATFORMS)" \
	  $(if $(TAG),--tag "$(TAG)") $(if $(COMPONENTS),--components "$(COMPONENTS)") \
	  $(if $(TOOLCHAIN_BASE),--toolchain-base "$(TOOLCHAIN_BASE)") \
	  $(if $(STATIC_BASE),--static-base "$(STATIC_BASE)") $(if $(INSECURE),--insecure) $(IMAGES_FLAGS)

## kubebin: build the pinned kube-apiserver, etcd, pebble, helm, BuildKit (buildkitd, buildctl) and Cluster API manager binaries, and kube-controller-manager and kube-scheduler of the same TEST_KUBE_VERSIONS (cached per version)
kubebin:
	$(GO) run ./cmd/bex-kubebin --versions $(TEST_KUBE_VERSIONS) --tools pebble,pebble-challtestsrv,helm,buildkitd,buildctl,capi-manager,capi-kubeadm-bootstrap-manager,capi-kubeadm-control-plane-manager
	$(GO) run ./cmd/bex-kubebin --versions $(TEST_KUBE_VERSIONS) --components kube-controller-manager,kube-scheduler

## test: the whole test suite against real components, the continuity suite included (screenshots in out/screenshots/, out/continuity-report.md; each package's and test's time in out/test-times.txt)
test: kubebin
	bash hack/ensure-test-tools.sh
	bash hack/ensure-sandbox-tools.sh
	bash hack/ensure-host-limits.sh
	BEX_TEST_CONTINUITY=1 GO=$(GO) GOTEST_FLAGS="$(GOTEST_FLAGS)" bash hack/test.sh
	@if ls out/screenshots/*.png >/dev/null 2>&1; then echo "browser screenshots:"; ls -1 out/screenshots/*.png; fi

## fuzz: each Go fuzz target for FUZZTIME (30s), one at a time (docs/security.md#fuzzing); their seed corpora run in make test
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash hack/fuzz.sh

## test-upgrade: the mixed-version suite: real upgrades under a tenant's load, gated by the verifier (out/upgrade-report.md)
test-upgrade:
	$(GO) run ./cmd/bex-kubebin --versions 1.35.4,1.36.3,1.37.2
	bash hack/ensure-host-limits.sh
	BEX_TEST_UPGRADE=1 $(GO) test -count=1 -timeout 40m ./test/upgrade/ -run . -v

## test-faults: only the fault suite (part of make test): Postgres killed and held down, bex-embedded killed mid-build, a crash-looping app (test/faults)
test-faults: kubebin
	bash hack/ensure-test-tools.sh
	bash hack/ensure-sandbox-tools.sh
	$(GO) test -count=1 -timeout 30m ./test/faults/ -run . -v

## test-continuity: tenants push, call the API and the CLI while the management plane rolls 1.36.3 -> 1.37.2, then push, read logs and roll back while a workload cluster of the local fleet rolls (out/continuity-report.md)
test-continuity:
	$(GO) run ./cmd/bex-kubebin --versions 1.36.3,1.37.2 --tools capi-manager,capi-kubeadm-bootstrap-manager,capi-kubeadm-control-plane-manager
	bash hack/ensure-test-tools.sh
	bash hack/ensure-sandbox-tools.sh
	bash hack/ensure-host-limits.sh
	BEX_TEST_CONTINUITY=1 $(GO) test -count=1 -timeout 45m ./test/continuity/ -run . -v

## generate: deepcopy code and CRDs from apis/, the scheduling API's generated code, the Cluster API CRDs
generate:
	bash hack/generate.sh
	bash hack/generate-scheduling.sh
	bash hack/generate-capi-crds.sh

## generate-install-crds: the third-party CRDs test/install dry-runs the chart and the Hetzner templates against (CAPH's two kinds from test/install/caph/v1beta1)
generate-install-crds:
	bash hack/generate-install-crds.sh

## verify: generated code and CRDs up to date, layering (internal/ imports no web/, builder/, controllers/, cmd/), gofmt, go vet
verify:
	bash hack/verify-generated.sh
	bash hack/verify-layering.sh
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## bench-push: push-to-live figures on the embedded platform (docs/perf.md); PUSHBENCH_FLAGS=--fleet adds the same pushes onto a local workload cluster
bench-push:
	$(GO) run ./test/bench/pushbench --pushes 6 $(PUSHBENCH_FLAGS)

## bench-edge: the edge against the app directly and against Caddy, nginx, HAProxy and Traefik, on loopback (docs/perf.md); installs nginx and HAProxy (as root) and builds Caddy and Traefik first when missing
bench-edge:
	bash hack/apt-ensure.sh bench-edge nginx=nginx haproxy=haproxy
	$(GO) run ./cmd/bex-kubebin --tools caddy,traefik
	$(GO) run ./test/bench/edgebench --json out/edge-bench.json $(EDGEBENCH_FLAGS)

## bench-apps: 10,000 apps over 1,000 tenants on a real control plane and Postgres: controllers' convergence, app list, edge table and latency, memory per app (docs/perf.md); builds the pinned kube-apiserver and etcd when missing; APPSBENCH_FLAGS=--apps 1000 is the quick mode
bench-apps:
	$(GO) run ./test/bench/appsbench $(APPSBENCH_FLAGS)

## bench-placement: 10,000 apps over 1,000 tenants placed on 100 clusters through the aggregated scheduling API: the App controller's placement reconciles and scheduling reads a second with the ClusterCapacity watch and with the 30 s resync (docs/perf.md); PLACEBENCH_FLAGS='--clusters 20 --apps 1000 --tenants 100' is the quick mode
bench-placement:
	$(GO) run ./test/bench/placebench $(PLACEBENCH_FLAGS)

clean:
	rm -rf bin out
