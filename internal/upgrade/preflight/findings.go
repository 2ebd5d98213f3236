package preflight

// Severity says whether a finding stops the upgrade of its cluster.
type Severity string

// The severities.
const (
	// Blocker: the cluster must not be upgraded until this is fixed.
	Blocker Severity = "Blocker"
	// Warning: the upgrade may go on, but the operator should look.
	Warning Severity = "Warning"
	// Info: what the check saw; nothing to do.
	Info Severity = "Info"
)

// The checks that produce findings.
const (
	CheckMVPWiring          = "MVPWiring"
	CheckFeatureGate        = "FeatureGate"
	CheckPeerAddress        = "PeerAddress"
	CheckServingCertificate = "ServingCertificate"
	CheckHostnames          = "Hostnames"
	CheckRolloutStrategy    = "RolloutStrategy"
	CheckSurgeCapacity      = "SurgeCapacity"
	CheckGracefulShutdown   = "GracefulShutdown"
	CheckVersion            = "Version"
)

// Reasons of the findings. docs/upgrades.md explains each one and how to fix
// it; keep the two in step.
const (
	// ReasonNoControlPlane (Blocker): no KubeadmControlPlane to check.
	ReasonNoControlPlane = "NoKubeadmControlPlane"
	// ReasonUnknownVersion (Blocker): the control plane's version cannot be
	// read.
	ReasonUnknownVersion = "UnknownVersion"

	// ReasonPeerCAFileMissing (Blocker): --peer-ca-file is not set; kubeadm
	// never sets it, so the Mixed Version Proxy is off.
	ReasonPeerCAFileMissing = "PeerCAFileMissing"
	// ReasonPeerCAFileNotClusterCA (Warning): --peer-ca-file is not the CA
	// that signs kubeadm's apiserver.crt.
	ReasonPeerCAFileNotClusterCA = "PeerCAFileNotClusterCA"
	// ReasonProxyClientCertFileMissing (Blocker): --proxy-client-cert-file
	// is set empty; the apiserver does not start with a peer CA and no
	// proxy client certificate.
	ReasonProxyClientCertFileMissing = "ProxyClientCertFileMissing"
	// ReasonProxyClientKeyFileMissing (Blocker): the same for the key.
	ReasonProxyClientKeyFileMissing = "ProxyClientKeyFileMissing"
	// ReasonRequestHeaderClientCAFileMissing (Blocker): the receiving
	// apiserver cannot verify the proxy's client certificate.
	ReasonRequestHeaderClientCAFileMissing = "RequestHeaderClientCAFileMissing"
	// ReasonRequestHeaderAllowedNamesExcludeProxy (Blocker): the allowed
	// names do not include the proxy client certificate's CN.
	ReasonRequestHeaderAllowedNamesExcludeProxy = "RequestHeaderAllowedNamesExcludeProxy"
	// ReasonRequestHeaderUsernameHeadersMismatch (Blocker): X-Remote-User
	// is not among the username headers; proxied requests lose their user.
	ReasonRequestHeaderUsernameHeadersMismatch = "RequestHeaderUsernameHeadersMismatch"
	// ReasonRequestHeaderGroupHeadersMismatch (Blocker): X-Remote-Group is
	// not among the group headers.
	ReasonRequestHeaderGroupHeadersMismatch = "RequestHeaderGroupHeadersMismatch"
	// ReasonRequestHeaderExtraHeadersPrefixMismatch (Blocker):
	// X-Remote-Extra- is not among the extra header prefixes.
	ReasonRequestHeaderExtraHeadersPrefixMismatch = "RequestHeaderExtraHeadersPrefixMismatch"
	// ReasonKubeadmDefault (Info): a flag MVP needs is not in extraArgs;
	// kubeadm's default, which is right for MVP, applies.
	ReasonKubeadmDefault = "KubeadmDefault"
	// ReasonFlagSet (Info): a flag MVP needs is set as it should be.
	ReasonFlagSet = "FlagSet"

	// ReasonFeatureGateOff (Blocker): before 1.36 the gate is alpha and off
	// by default, and extraArgs do not turn it on.
	ReasonFeatureGateOff = "FeatureGateOff"
	// ReasonFeatureGateDisabled (Blocker): from 1.36 the gate is on by
	// default, and extraArgs turn it off.
	ReasonFeatureGateDisabled = "FeatureGateDisabled"
	// ReasonAPIServerIdentityDisabled (Blocker): MVP depends on the
	// APIServerIdentity gate, and extraArgs turn it off.
	ReasonAPIServerIdentityDisabled = "APIServerIdentityDisabled"
	// ReasonFeatureGatesInvalid (Blocker): the feature-gates extraArg does
	// not parse.
	ReasonFeatureGatesInvalid = "FeatureGatesInvalid"
	// ReasonPeerFlagsWithGateOff (Blocker): --peer-* flags with the gate
	// off; kube-apiserver refuses to start.
	ReasonPeerFlagsWithGateOff = "PeerFlagsWithGateOff"
	// ReasonFeatureGateOn (Info): the gate is on for the current version.
	ReasonFeatureGateOn = "FeatureGateOn"

	// ReasonPeerAdvertiseIncomplete (Warning): only one of
	// --peer-advertise-ip and --peer-advertise-port is set; it is ignored.
	ReasonPeerAdvertiseIncomplete = "PeerAdvertiseIncomplete"
	// ReasonPeerAdvertiseIPShared (Blocker): --peer-advertise-ip in the
	// shared clusterConfiguration makes every apiserver advertise one
	// address.
	ReasonPeerAdvertiseIPShared = "PeerAdvertiseIPShared"
	// ReasonPeerAdvertiseDefault (Info): peers use --advertise-address and
	// --secure-port.
	ReasonPeerAdvertiseDefault = "PeerAdvertiseDefault"

	// ReasonServingCertificateKubeadm (Info): kubeadm's apiserver.crt
	// carries kubernetes.default.svc.
	ReasonServingCertificateKubeadm = "ServingCertificateKubeadm"
	// ReasonServingCertificateMissingName (Blocker): the custom serving
	// certificate lacks kubernetes.default.svc; peers refuse it.
	ReasonServingCertificateMissingName = "ServingCertificateMissingName"
	// ReasonServingCertificateUnverified (Warning): a custom serving
	// certificate is configured whose content the KCP does not show.
	ReasonServingCertificateUnverified = "ServingCertificateUnverified"
	// ReasonServingCertificateNamed (Info): the custom serving certificate
	// carries kubernetes.default.svc.
	ReasonServingCertificateNamed = "ServingCertificateNamed"

	// ReasonShutdownDelayBreaksPeerProxy (Warning): the load-balancer
	// hand-off runs, MVP is wired and --shutdown-delay-duration is above
	// zero. For that long after SIGTERM
	// a stopping apiserver keeps serving but has already closed its
	// peer-endpoint store (kube-apiserver does so in a pre-shutdown hook, up
	// to 1.37 at least), so every request it would proxy to a peer gets
	// "503 Error getting ip and port info of the remote server while
	// proxying".
	ReasonShutdownDelayBreaksPeerProxy = "ShutdownDelayBreaksPeerProxy"
	// ReasonShutdownDelayUnset (Warning): no load-balancer hand-off and
	// --shutdown-delay-duration is 0, so the load balancer keeps sending
	// new connections to a stopping apiserver that no longer listens.
	ReasonShutdownDelayUnset = "ShutdownDelayUnset"
	// ReasonShutdownRetryAfterUnset (Warning): --shutdown-send-retry-after
	// is not true, so requests that arrive while an apiserver drains get a
	// 503 instead of a 429 with Retry-After that clients retry.
	ReasonShutdownRetryAfterUnset = "ShutdownRetryAfterUnset"
	// ReasonGracefulShutdown (Info): Retry-After is on, and the delay
	// suits the hand-off: none with it (and MVP wired), some without it.
	ReasonGracefulShutdown = "GracefulShutdown"

	// ReasonDuplicateHostname (Blocker): two control-plane machines share a
	// hostname; the apiserver identity lease is per hostname.
	ReasonDuplicateHostname = "DuplicateHostname"
	// ReasonHostnameUnknown (Warning): a control-plane machine has no node
	// name or hostname address yet.
	ReasonHostnameUnknown = "HostnameUnknown"
	// ReasonHostnamesUnique (Info): every control-plane machine has its own
	// hostname.
	ReasonHostnamesUnique = "HostnamesUnique"

	// ReasonMaxSurgeZeroTooFewReplicas (Blocker): maxSurge 0 needs at least
	// 3 replicas.
	ReasonMaxSurgeZeroTooFewReplicas = "MaxSurgeZeroTooFewReplicas"
	// ReasonMaxSurgeUnsupported (Blocker): maxSurge is neither 0 nor 1.
	ReasonMaxSurgeUnsupported = "MaxSurgeUnsupported"
	// ReasonMaxSurgeZero (Info): machines are deleted before their
	// replacement is created.
	ReasonMaxSurgeZero = "MaxSurgeZero"
	// ReasonMaxSurgeOne (Info): a replacement is created before the old
	// machine is deleted; the account needs room for one more server.
	ReasonMaxSurgeOne = "MaxSurgeOne"

	// ReasonInsufficientCapacity (Blocker): the account cannot create the
	// surge machine.
	ReasonInsufficientCapacity = "InsufficientCapacity"
	// ReasonSurgeCapacityUnknown (Warning): capacity could not be read.
	ReasonSurgeCapacityUnknown = "SurgeCapacityUnknown"
	// ReasonSurgeCapacityUnchecked (Warning): no capacity source is
	// configured for the cluster.
	ReasonSurgeCapacityUnchecked = "SurgeCapacityUnchecked"
	// ReasonSurgeCapacityAvailable (Info): the account can create the surge
	// machine.
	ReasonSurgeCapacityAvailable = "SurgeCapacityAvailable"
	// ReasonSurgeCapacityNotNeeded (Info): maxSurge is 0.
	ReasonSurgeCapacityNotNeeded = "SurgeCapacityNotNeeded"
)

// Finding is one result of one check.
type Finding struct {
	// Check is the check that produced it (a Check constant).
	Check string `json:"check"`
	// Severity says whether it stops the upgrade.
	Severity Severity `json:"severity"`
	// Reason is a CamelCase Reason constant.
	Reason string `json:"reason"`
	// Message says what is wrong and exactly what to do.
	Message string `json:"message"`
	// Evidence is what the check read, such as the extraArg's value.
	Evidence string `json:"evidence,omitempty"`
	// FixedByWireMVP is true when the FleetUpgrade's wire-MVP step
	// (spec.wireMVP) fixes the finding.
	FixedByWireMVP bool `json:"fixedByWireMVP,omitempty"`
}

// Blockers returns the Blocker findings, in order.
func Blockers(findings []Finding) []Finding {
	var out []Finding
	for _, f := range findings {
		if f.Severity == Blocker {
			out = append(out, f)
		}
	}
	return out
}

// OnlyWireMVPBlockers reports whether there is at least one Blocker and the
// wire-MVP step fixes every one of them.
func OnlyWireMVPBlockers(findings []Finding) bool {
	bs := Blockers(findings)
	for _, b := range bs {
		if !b.FixedByWireMVP {
			return false
		}
	}
	return len(bs) > 0
}
