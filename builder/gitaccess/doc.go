// Package gitaccess is what the git receiver (builder/gitserver) asks of
// the rest of the platform, backed by the platform's own records: Auth
// authenticates a pusher by an API token (HTTP) or a registered SSH key in
// the store, names the tenant and the actor the push is recorded under, and
// refuses the pushes of a credential that acts as a viewer (a member's role,
// narrowed by a token's scope);
// Repos says an app's repository exists when its App object does, with the
// App's deploy branch. The receiver itself knows no tokens, tenants or Apps:
// bex-git and make run's bex-embedded hand it these.
package gitaccess
