#!/usr/bin/env bash
# generate-scheduling.sh regenerates the code derived from the
# scheduling.bex.co types in apis/scheduling: deep copies (internal and
# v1alpha1), v1alpha1 ⇄ internal conversions, v1alpha1 defaulters, and the
# OpenAPI definitions bex-apiserver publishes (apis/scheduling/openapi). The
# generators are those of k8s.io/code-generator and k8s.io/kube-openapi at the
# versions go.mod pins. Commit its output. It is deliberately not part of
# hack/generate.sh: controller-gen does not handle internal types.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

pkg=bex.co/bex/apis/scheduling
header="$(mktemp)"
trap 'rm -f "$header"' EXIT
: >"$header"

go run k8s.io/code-generator/cmd/deepcopy-gen \
  --go-header-file "$header" --output-file zz_generated.deepcopy.go \
  "$pkg" "$pkg/v1alpha1"

go run k8s.io/code-generator/cmd/conversion-gen \
  --go-header-file "$header" --output-file zz_generated.conversion.go \
  "$pkg/v1alpha1"

go run k8s.io/code-generator/cmd/defaulter-gen \
  --go-header-file "$header" --output-file zz_generated.defaults.go \
  "$pkg/v1alpha1"

# The definitions include the apimachinery types the group's objects embed.
go run k8s.io/kube-openapi/cmd/openapi-gen \
  --go-header-file "$header" \
  --output-dir apis/scheduling/openapi --output-pkg "$pkg/openapi" \
  --output-file zz_generated.openapi.go \
  --output-model-name-file zz_generated.model_name.go \
  --report-filename /dev/null \
  k8s.io/apimachinery/pkg/apis/meta/v1 \
  k8s.io/apimachinery/pkg/runtime \
  k8s.io/apimachinery/pkg/version \
  k8s.io/apimachinery/pkg/api/resource \
  "$pkg/v1alpha1"
