// Package edge_test runs the edge router as users deploy it: bex-edge
// processes against a real apiserver (Routes, EndpointSlices), Postgres
// (shared certificates) and pebble (ACME).
package edge_test
