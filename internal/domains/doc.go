// Package domains owns the platform's rule for who may claim a Route's
// hostname, shared by the Route controller (which decides) and the API
// (which refuses early with a clear answer):
//
//   - Policy.Check refuses the platform's own names (the apps' domain, its
//     apex and wildcards over it, names the operator reserved such as the
//     API, dashboard, git and registry hosts) and names that are not under
//     a registrable domain by the Public Suffix List (co.uk, github.io, and
//     wildcards over them such as *.co.uk);
//   - Policy.DefaultHostnameApp recognises a tenant's own default hostname,
//     <app>-<tenant>.<domain>, which needs no proof;
//   - every other name is proved by a DNS TXT record at ChallengeName
//     holding the value Token gives for the tenant and the hostname, as
//     Render and Heroku ask for. Lookups of it answer TXTValues.
//
// The token is derived, not stored: the same tenant, hostname and platform
// give the same value in every process, and another tenant's token differs,
// so a record the domain's owner published for one tenant proves nothing
// for another. It is not a secret: it sits in public DNS.
package domains
