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
#   CAPH (test/install/caph/v1beta1): HetznerCluster, HCloudMachineTemplate
#   prometheus-operator monitoring $PROMOP_VERSION: ServiceMonitor
#   cert-manager $CERTMANAGER_VERSION: Certificate, Issuer
#
# CAPH's Go module is not on the module proxy (proxy.golang.org answers 403
# for github.com/syself/cluster-api-provider-hetzner), so its two kinds come
# from test/install/caph/v1beta1: the fields bex's template uses, described
# from CAPH's API reference, with unknown fields refused.
# The third-party generation runs in temporary modules: it never edits go.mod.
set -euo pipefail

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

# CAPH: the part of its API that the template uses (see the package's doc).
"$gen" crd paths=./test/install/caph/v1beta1 output:crd:artifacts:config="$tmp/caph-crds"

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
