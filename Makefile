# muster — see README.md. Every target works on a fresh clone with only Go.
# bash for pipefail in the bench rule (a failed benchmark must fail make).
SHELL    := /bin/bash
GO       ?= go
BIN      ?= bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The in-process kube-apiserver parses its own version; stamp it so clients
# that check it do not choke on the unstamped default.
K8S_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v1.37.2 \
               -X k8s.io/component-base/version.gitMajor=1 \
               -X k8s.io/component-base/version.gitMinor=37
LDFLAGS  := -X github.com/muster-io/muster/internal/version.Version=$(VERSION) $(K8S_LDFLAGS)
# Integration tests share one control plane per test binary; keep -p 2 so two
# cold links fit in memory on small machines.
TESTFLAGS ?= -p 2 -timeout 60m

BINARIES := muster muster-scheduler muster-podgrouper muster-sandbox

.PHONY: all build test unit lint vet fmt run bench fuzz catalog-docs manifests clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))
	@cp $(BIN)/muster $(BIN)/kubectl-muster

## image: the container image without a Docker engine (hack/image): static
## binaries on an empty base, user 65532, linux/amd64 and linux/arm64. Writes
## $(BIN)/image/: oci/ (OCI layout), muster-oci.tar (OCI archive) and
## muster-linux-<arch>.tar (docker load format), the image named
## ghcr.io/muster-io/muster:$(VERSION). File times are the commit's
## (SOURCE_DATE_EPOCH): one commit, one digest.
IMAGE_PLATFORMS   ?= linux/amd64,linux/arm64
REVISION          ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
.PHONY: image push
image:
	$(GO) run ./hack/image/cmd/muster-image build -out $(BIN)/image -platforms '$(IMAGE_PLATFORMS)' \
	  -version '$(VERSION)' -revision '$(REVISION)' -created '$(SOURCE_DATE_EPOCH)' -ldflags '$(LDFLAGS)'

## push: make image, then push it (both platforms, one index) to
## $(REGISTRY)/muster:$(TAG) with the credentials of docker login
TAG ?= $(VERSION)
push:
	@test -n '$(REGISTRY)' || { echo 'usage: make push REGISTRY=registry.example.com/team [TAG=v0.1.0]'; exit 2; }
	$(MAKE) image
	$(GO) run ./hack/image/cmd/muster-image push -layout $(BIN)/image/oci '$(REGISTRY)/muster:$(TAG)'

## test: every test: unit, catalog, CLI, the integration tests on the
## in-process control plane and the real operators (the command CI runs)
test:
	$(GO) test $(TESTFLAGS) -ldflags '$(K8S_LDFLAGS)' ./...

## unit: the fast tier: every test of the packages that link no control
## plane (hack/unit-packages.sh), with -short (which also leaves out the
## corpus-heavy catalog checks and the CRD drift check)
unit:
	$(GO) test -short $(TESTFLAGS) -ldflags '$(K8S_LDFLAGS)' $$(hack/unit-packages.sh)

## operators: build the real operators the tests and the sandbox run (cached
## in ~/.cache/muster-operators; a no-op when warm)
.PHONY: operators
operators:
	$(GO) run ./hack/operators

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## run: the sandbox — an in-process cluster with fake GPU nodes and muster
run:
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/muster-sandbox $(ARGS)

## bench: every benchmark of BENCHMARKS.md (not part of make test; ~40 min on
## 2 cores). Results (CSV, SVG, Markdown tables) go to benchmarks/, the raw
## output to benchmarks/bench.txt. Sizes: MUSTER_BENCH_* (see BENCHMARKS.md).
BENCH_OUT ?= $(CURDIR)/benchmarks
bench: build
	@mkdir -p $(BENCH_OUT)
	set -o pipefail; { $(GO) test -run '^$$' -bench 'GangForPod|EvaluateBombs|PodBytes' -benchmem -count 3 ./definition/ ./definition/jq/ ./internal/podtrim/ && \
	  $(GO) test -run '^$$' -bench 'VictimSearch|BuildNoVictims' -benchtime 10x -benchmem -ldflags '$(K8S_LDFLAGS)' ./plugins/gang/... && \
	  MUSTER_BENCH_OUT=$(BENCH_OUT) MUSTER_BENCH_BIN=$(abspath $(BIN)) $(GO) test -timeout 120m -run '^$$' \
	    -bench '^(BenchmarkSchedulerThroughput|BenchmarkSchedulerBound|BenchmarkContention|BenchmarkPodGrouperRates|BenchmarkPodGrouperCatchUp|BenchmarkHostileKarta|BenchmarkMemory|BenchmarkPreemption|BenchmarkDashboard)$$' \
	    -benchtime 1x -benchmem -ldflags '$(K8S_LDFLAGS)' ./test/e2e/ && \
	  $(GO) test -run '^$$' -bench 'Describe1000|BenchmarkFit$$' -benchtime 5x -benchmem -ldflags '$(K8S_LDFLAGS)' ./test/e2e/ ; } 2>&1 | tee $(BENCH_OUT)/bench.txt

## bench-smoke: the benchmark machinery at tiny sizes (also part of make test)
.PHONY: bench-smoke
bench-smoke:
	$(GO) test -run 'TestBenchSmoke' -v -ldflags '$(K8S_LDFLAGS)' ./test/e2e/ ./test/benchreport/

## fuzz: a short run of every fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 30s ./definition
	$(GO) test -run '^$$' -fuzz 'FuzzEvaluate$$' -fuzztime 30s ./definition
	$(GO) test -run '^$$' -fuzz FuzzEvaluateGrowth -fuzztime 30s ./definition/jq

## catalog-docs: render catalog/README.md from the definitions' summary annotations
catalog-docs:
	$(GO) run ./hack/catalogdocs -o catalog/README.md

## rbac: regenerate the pod-grouper's read role from the catalog (kustomize tree and Helm chart)
.PHONY: rbac
rbac:
	$(GO) run ./hack/rbacgen/cmd/rbacgen manifests/rbac/podgrouper-catalog-read.yaml manifests/helm/muster/templates/podgrouper-catalog-read.yaml

## manifests: generate the Karta CRD from api/v1alpha1/types.go (controller-gen,
## pinned in hack/tools/go.mod) and copy the PodGroup CRD of the scheduler-plugins
## module we build against (a generated artifact of that dependency, header kept)
CONTROLLER_GEN ?= $(BIN)/controller-gen
$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	@mkdir -p $(BIN)
	cd hack/tools && $(GO) build -o $(abspath $(CONTROLLER_GEN)) sigs.k8s.io/controller-tools/cmd/controller-gen

manifests: $(CONTROLLER_GEN) rbac
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=manifests/crds
	install -m 0644 "$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/scheduler-plugins)/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" manifests/crds/

clean:
	rm -rf $(BIN)
