#!/usr/bin/env bash
# generate-install-crds.sh writes deploy/install-crds/: the CRDs that the
# production install artifacts (deploy/chart/bex and deploy/capi/hetzner) use
# and that neither Kubernetes nor deploy/crds nor deploy/capi-crds provide.
# test/install installs them into the pinned kube-apiserver so that every
# rendered object can be dry-run server-side. A real management cluster gets
# them from clusterctl (Cluster API, CAPH), cert-manager and the Prometheus
# operator instead. Each is generated with controller-gen from its API module:
#
#   Cluster API (the version go.mod pins): MachineHealthCheck,
#     KubeadmConfigTemplate (v1beta2)
#   CAPH $CAPH_VERSION: HetznerCluster, HCloudMachineTemplate
#   prometheus-operator monitoring $PROMOP_VERSION: ServiceMonitor
#   cert-manager $CERTMANAGER_VERSION: Certificate, Issuer
#
# CAPH is not on every Go module proxy (proxy.golang.org answers 403 for
# github.com/syself/cluster-api-provider-hetzner). The script tries the
# proxy first; when that fails, set CAPH_SRC to a git clone of
# https://github.com/syself/cluster-api-provider-hetzner and it takes the CRDs
# CAPH ships at the $CAPH_VERSION tag (see below). Everything else comes from the module proxy.
# The third-party generation runs in temporary modules: it never edits go.mod.
set -euo pipefail

CAPH_VERSION="${CAPH_VERSION:-v1.1.8}"
PROMOP_VERSION="${PROMOP_VERSION:-v0.95.2}"
CERTMANAGER_VERSION="${CERTMANAGER_VERSION:-v1.21.2}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

out=deploy/install-crds
tmp="$(mktemp -d)"
trap 'chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# One controller-gen for every source: the one go.mod pins.
go build -o "$tmp/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen
gen="$tmp/controller-gen"

# Cluster API: the main module already requires sigs.k8s.io/cluster-api/api.
"$gen" crd \
  paths=sigs.k8s.io/cluster-api/api/core/v1beta2 \
  paths=sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2 \
  output:crd:artifacts:config="$tmp/capi"

# CAPH: its own module, as released. When the proxy has it, controller-gen
# runs over its api/v1beta1 in that module. Otherwise the CRDs come from the
# $CAPH_VERSION tag of a clone (config/crd/bases, which CAPH generates with
# controller-gen from the same api/v1beta1): its API package imports modules
# that are not on every proxy either (github.com/guettli/check-conditions), so
# generating from the clone is not always possible.
caph="$tmp/caph"
mkdir -p "$caph" "$tmp/caph-crds"
if dir="$(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "github.com/syself/cluster-api-provider-hetzner@$CAPH_VERSION" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" && [ -n "$dir" ]; then
  cp -r "$dir/." "$caph/"
  chmod -R u+w "$caph"
  (cd "$caph" && GOWORK=off GOFLAGS=-mod=mod "$gen" crd paths=./api/v1beta1/... output:crd:artifacts:config="$tmp/caph-crds")
elif [ -n "${CAPH_SRC:-}" ]; then
  git -C "$CAPH_SRC" archive "$CAPH_VERSION" config/crd/bases | tar -x -C "$caph"
  cp "$caph"/config/crd/bases/*.yaml "$tmp/caph-crds/"
else
  echo "generate-install-crds: github.com/syself/cluster-api-provider-hetzner@$CAPH_VERSION is not on the module proxy; set CAPH_SRC to a git clone of it" >&2
  exit 1
fi

# prometheus-operator and cert-manager: a temporary module that requires them.
mod="$tmp/mod"
mkdir -p "$mod"
(
  cd "$mod"
  export GOWORK=off GOFLAGS=-mod=mod
  go mod init bex.co/installcrds >/dev/null 2>&1
  go get "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$PROMOP_VERSION" \
    "github.com/cert-manager/cert-manager@$CERTMANAGER_VERSION" >/dev/null 2>&1
  "$gen" crd paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
    output:crd:artifacts:config="$tmp/promop"
  "$gen" crd paths=github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1 \
    output:crd:artifacts:config="$tmp/certmanager"
)

rm -f "$out"/*.yaml
cp "$tmp/capi/cluster.x-k8s.io_machinehealthchecks.yaml" "$out/"
cp "$tmp/capi/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml" "$out/"
cp "$tmp/caph-crds/infrastructure.cluster.x-k8s.io_hetznerclusters.yaml" "$out/"
cp "$tmp/caph-crds/infrastructure.cluster.x-k8s.io_hcloudmachinetemplates.yaml" "$out/"
cp "$tmp/promop/monitoring.coreos.com_servicemonitors.yaml" "$out/"
cp "$tmp/certmanager/cert-manager.io_certificates.yaml" "$out/"
cp "$tmp/certmanager/cert-manager.io_issuers.yaml" "$out/"
