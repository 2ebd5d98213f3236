#!/usr/bin/env bash
# generate-capi-crds.sh writes deploy/capi-crds/: the Cluster API CRDs that
# bex-apiserver reads the fleet from (Cluster, Machine, MachineDeployment and
# KubeadmControlPlane, v1beta2 only), generated with controller-gen from the
# sigs.k8s.io/cluster-api/api module that go.mod pins. Tests and embedded mode
# install them into the pinned kube-apiserver; a real management cluster gets
# them from clusterctl instead. Run it after bumping sigs.k8s.io/cluster-api/api.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

out=deploy/capi-crds
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

go tool controller-gen crd \
  paths=sigs.k8s.io/cluster-api/api/core/v1beta2 \
  paths=sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2 \
  output:crd:artifacts:config="$tmp"

rm -f "$out"/*.yaml
for kind in \
  cluster.x-k8s.io_clusters \
  cluster.x-k8s.io_machines \
  cluster.x-k8s.io_machinedeployments \
  controlplane.cluster.x-k8s.io_kubeadmcontrolplanes; do
  cp "$tmp/$kind.yaml" "$out/$kind.yaml"
done
