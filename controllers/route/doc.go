// Package route reconciles Route objects: it decides which Route holds a
// hostname, and observes what a tenant must fix before the edge can serve
// it, writing the Route's Admitted, DNSReady, CertificateReady and Ready
// conditions and its observedGeneration.
//
// A hostname belongs to the tenant whose Route claimed it first (the
// oldest by creationTimestamp, then namespace/name); within that tenant the
// oldest Route for each path prefix is admitted. The Route controller reads
// the facts it needs from outside Kubernetes through two small interfaces
// handed to it: a Resolver for DNS (net.Resolver) and CertificateStates for
// what the edge's shared certificate storage holds (edge.Certificates). DNS
// and certificates change without a Kubernetes event, so every Route is
// observed again after a while: soon while it is not served, hourly once it
// is.
//
// It hands the edge one fact: a Route with Admitted=True may be served. It
// never obtains certificates itself; the edge does, on the first HTTPS
// request to an admitted hostname.
package route
