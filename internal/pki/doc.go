// Package pki makes the X.509 certificate authorities and certificates bex
// signs itself, and keeps them in PEM files.
//
// It owns the plumbing the callers share: a KeyPair (a certificate and its
// P-256 key), a self-signed CA from a Spec (NewCA), certificates a CA issues
// for a Spec (KeyPair.Issue with a new key, KeyPair.Sign for a key from a
// certificate request), PEM encoding and parsing of certificates and keys
// (PKCS #8, or SEC 1 where a caller's files have always held it), the two
// files a key pair is kept in with their modes (Files), and whether a
// certificate still carries a Spec's names (Covers) and stays valid long
// enough (ValidFor).
//
// The policy is the callers': which certificates exist, their subjects,
// names, lifetimes and key usages, where their files are, and when a
// certificate is issued anew. They are internal/controlplane (the local
// control plane's CAs, apiserver serving certificates and client
// certificates), apiserver/registration (bex-apiserver's serving certificate
// for its APIService), internal/edge (LocalCA, the certmagic issuer of
// embedded mode) and internal/acmetest (the certificate pebble's directory is
// served with).
package pki
