// Package crds_test checks the platform's CustomResourceDefinitions
// (deploy/crds) against a real kube-apiserver: good specs are accepted and
// defaulted, bad specs and forbidden updates are refused with an error that
// names the field. It also checks that hack/verify-generated.sh catches CRDs
// that no longer match apis/.
package crds_test
