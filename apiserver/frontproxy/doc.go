// Package frontproxy caches the verification of the front proxy's client
// certificate. The kube-apiserver's aggregator proxies every request to
// bex-apiserver over a few long-lived connections, each presenting the same
// front-proxy certificate and naming the user in X-Remote-User,
// X-Remote-Group and X-Remote-Extra- headers. k8s.io/apiserver verifies that
// certificate's chain against the requestheader client-CA on every request;
// this package's Authenticator remembers a successful verification for a
// short while, keyed by the presented chain and the CA bundle it was
// verified against, and still reads the headers and checks the allowed
// names per request.
//
// Authenticator sits in front of the generic server's delegating
// authenticator (apiserver.Options.Config puts it there) and hands it every
// request it does not authenticate itself, so client certificates, token
// review and the refusal of anonymous requests stay exactly as before.
package frontproxy
