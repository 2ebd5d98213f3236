#!/usr/bin/env bash
# generate.sh regenerates what controller-gen derives from the CRD types in
# apis/: the deep-copy functions (apis/<group>/<version>/zz_generated.deepcopy.go)
# and the CRDs (deploy/crds/<group>_<plural>.yaml), and copies the CRDs into the
# Helm chart (deploy/chart/bex/crds/), whose copies must be identical. `make generate` runs it;
# commit its output. hack/verify-generated.sh checks that it is current.
#
# The CRDs of the local infrastructure provider (infrastructure.bex.co) go to
# deploy/localinfra-crds instead: a management cluster on Hetzner has no use
# for them, so the chart does not carry them.
#
# The CRD packages are those whose doc.go carries +kubebuilder:object:generate=true
# (hack/crd-packages.sh). Other packages under apis/, such as the aggregated
# scheduling API, have their own generators and are left alone.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
paths="$(hack/crd-packages.sh)"

go tool controller-gen object paths="$paths"
rm -f deploy/crds/*.yaml
go tool controller-gen crd paths="$paths" output:crd:artifacts:config=deploy/crds
rm -f deploy/localinfra-crds/*.yaml
mv deploy/crds/infrastructure.bex.co_*.yaml deploy/localinfra-crds/

rm -f deploy/chart/bex/crds/*.yaml
mkdir -p deploy/chart/bex/crds
cp deploy/crds/*.yaml deploy/chart/bex/crds/
