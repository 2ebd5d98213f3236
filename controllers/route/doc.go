// Package route reconciles Route objects: it decides which Route holds a
// hostname, and observes what a tenant must fix before the edge can serve
// it, writing the Route's DomainVerified, Admitted, DNSReady,
// CertificateReady and Ready conditions and its observedGeneration.
//
// A hostname must be proved before it is served (DomainVerified): a DNS TXT
// record _bex-challenge.<hostname> holds the token package domains derives
// for the tenant and the hostname, or the hostname is the default hostname
// of one of the tenant's Apps. The platform's own names and public
// suffixes (and wildcards over them) are refused for good. A hostname
// belongs to the tenant that proved it whose Route claimed it first (the
// oldest by creationTimestamp, then namespace/name): a Route made with
// kubectl is judged by the same rule as one made through the API, and an
// older Route of a tenant that proved nothing takes nothing. A wildcard and
// the names it covers are judged together by the same rule: of two tenants'
// overlapping Routes (*.example.com, www.example.com) the earlier holds, and
// one that lost holds nothing against later ones. Within the owning tenant
// the oldest Route for each path prefix is admitted.
//
// The Route controller reads the facts it needs from outside Kubernetes
// through two small interfaces handed to it: a Resolver for DNS
// (net.Resolver, maybe aimed at the operator's --dns-resolver) and
// CertificateStates for what the edge's shared certificate storage holds
// (edge.Certificates). DNS and certificates change without a Kubernetes
// event, so every Route is observed again after a while: soon while it is
// not served (a TXT record just created is seen within PendingRecheck),
// hourly once it is (a record removed takes the name away then). A Route's
// own certificate Secret (spec.tls.secretName) is seen at once: the
// controller watches Secrets' metadata only (a change of a Secret's data
// changes its resourceVersion) and reads the Secret with Reader, uncached,
// so that the manager holds no Secret's data.
//
// It hands the edge one fact: a Route with Admitted=True and
// DomainVerified=True may be served. It never obtains certificates itself;
// the edge does, on the first HTTPS request to such a hostname.
package route
