# syntax=docker/dockerfile:1
# One image with muster's cluster binaries. The Deployment in manifests/
# runs two of them (muster-scheduler and the muster-podgrouper sidecar) by
# setting each container's command; the CLI is there for `kubectl exec` and
# for copying out. muster-sandbox is not shipped: it is a local tool that
# runs a whole control plane in-process (make run).
#
# Without Docker, `make image` builds the same image (hack/image): the same
# binaries, paths, user, entrypoint and labels; hack/image/dockerfile_test.go
# holds this file and the builder equal.
#
#   docker build -t ghcr.io/muster-io/muster:$(git describe --tags --always --dirty) \
#     --build-arg VERSION=$(git describe --tags --always --dirty) --build-arg REVISION=$(git rev-parse HEAD) .
#
# Build stage: `make build` as a developer's (ldflags stamp the muster and
# Kubernetes versions), static (CGO off), without the VCS stamp and the
# build paths (-trimpath), and only the shipped binaries.
FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first: this layer is reused while go.mod and go.sum stay.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ENV CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath"
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    make build BIN=/out VERSION=${VERSION} BINARIES="muster-scheduler muster-podgrouper muster"

# Runtime: distroless static, non-root (uid 65532), no shell.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/muster-io/muster" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.description="muster: gang scheduling for any workload type"
COPY --from=build /out/muster-scheduler  /usr/local/bin/muster-scheduler
COPY --from=build /out/muster-podgrouper /usr/local/bin/muster-podgrouper
COPY --from=build /out/muster            /usr/local/bin/muster
COPY --from=build /out/kubectl-muster    /usr/local/bin/kubectl-muster
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/muster-scheduler"]
