// Package openapi holds the generated OpenAPI definitions of
// scheduling.bex.co/v1alpha1 and of the apimachinery types it embeds;
// bex-apiserver publishes them at /openapi/v2 and /openapi/v3.
package openapi
