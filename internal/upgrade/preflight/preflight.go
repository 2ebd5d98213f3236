package preflight

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/version"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"bex.co/bex/internal/upgrade/plan"
)

// Input is what the checks of one cluster read.
type Input struct {
	// Cluster is the Cluster API Cluster; it is handed to Capacity.
	Cluster *clusterv1.Cluster
	// ControlPlane is the Cluster's KubeadmControlPlane.
	ControlPlane *controlplanev1.KubeadmControlPlane
	// Machines are the control plane's Machines. Machines labelled for
	// another control plane (cluster.x-k8s.io/control-plane-name) are
	// ignored.
	Machines []clusterv1.Machine
	// LoadBalancerHandoff reports that each control-plane server leaves
	// the API load balancer and drains before its machine is deleted (the
	// platform's Hetzner hand-off): a stopping apiserver then gets no new
	// connections, and needs no shutdown delay.
	LoadBalancerHandoff bool
}

// Run checks one cluster and returns its findings in a stable order: by
// check (version, wiring, gate, peer address, serving certificate,
// hostnames, graceful shutdown, rollout, capacity), then by flag or machine
// name. capacity may
// be nil; it is asked only when the rollout surges (maxSurge 1).
func Run(ctx context.Context, in Input, capacity Capacity) []Finding {
	kcp := in.ControlPlane
	if kcp == nil {
		return []Finding{{Check: CheckVersion, Severity: Blocker, Reason: ReasonNoControlPlane,
			Message: "the cluster has no KubeadmControlPlane: fleet upgrades drive KubeadmControlPlane rollouts only"}}
	}
	current, raw, err := plan.CurrentVersion(kcp)
	if err != nil {
		return []Finding{{Check: CheckVersion, Severity: Blocker, Reason: ReasonUnknownVersion,
			Message:  fmt.Sprintf("cannot read the control plane's Kubernetes version (%v): set spec.version to a version such as v1.36.3", err),
			Evidence: raw}}
	}
	var out []Finding
	out = append(out, wiringFindings(kcp)...)
	out = append(out, gateFindings(kcp, current)...)
	out = append(out, peerAddressFindings(kcp)...)
	out = append(out, servingCertFindings(kcp)...)
	out = append(out, hostnameFindings(kcp, in.Machines)...)
	out = append(out, shutdownFindings(kcp, in.LoadBalancerHandoff)...)
	rollout, surge := rolloutFindings(kcp)
	out = append(out, rollout...)
	out = append(out, capacityFindings(ctx, in, surge, capacity)...)
	return out
}

// MVPWired reports whether the KubeadmControlPlane's apiserver flags run the
// Mixed Version Proxy on the version it runs now: the wiring, gate and peer
// address checks, wired when none of them is a Blocker. It returns those
// findings too.
func MVPWired(kcp *controlplanev1.KubeadmControlPlane) (bool, []Finding) {
	if kcp == nil {
		return false, []Finding{{Check: CheckVersion, Severity: Blocker, Reason: ReasonNoControlPlane,
			Message: "no KubeadmControlPlane"}}
	}
	current, raw, err := plan.CurrentVersion(kcp)
	if err != nil {
		return false, []Finding{{Check: CheckVersion, Severity: Blocker, Reason: ReasonUnknownVersion,
			Message: fmt.Sprintf("cannot read the control plane's Kubernetes version: %v", err), Evidence: raw}}
	}
	var fs []Finding
	fs = append(fs, wiringFindings(kcp)...)
	fs = append(fs, gateFindings(kcp, current)...)
	fs = append(fs, peerAddressFindings(kcp)...)
	return len(Blockers(fs)) == 0, fs
}

// WireMVPPatch returns the full apiServer extraArgs list the wire-MVP step
// should write on the KubeadmControlPlane for a control plane that runs
// version: the current extraArgs in their order, with the MVP flags set or
// corrected, and new ones appended. Files are kubeadm's (under
// clusterConfiguration.certificatesDir, /etc/kubernetes/pki by default):
// the peer CA is ca.crt, which signs apiserver.crt; the proxy client is
// front-proxy-client.crt/.key; the requestheader CA is front-proxy-ca.crt.
// Before 1.36 (or when version does not parse) it also turns
// UnknownVersionInteroperabilityProxy on in feature-gates; from 1.36 it only
// removes an explicit "=false". List-valued flags keep their values and gain
// the one MVP needs. It also sets graceful shutdown
// (--shutdown-send-retry-after=true, and --shutdown-delay-duration 0s with
// the load-balancer hand-off, else 5s unless a delay is set), so that the
// version bump that follows fails no request on connections still open to
// a stopping apiserver (shutdownFindings). Writing the result rolls the
// control plane.
func WireMVPPatch(kcp *controlplanev1.KubeadmControlPlane, ver string, handoff bool) []ExtraArg {
	certDir := certificatesDir(kcp)
	var out []ExtraArg
	index := map[string]int{}
	for _, a := range kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs {
		v := ""
		if a.Value != nil {
			v = *a.Value
		}
		index[a.Name] = len(out)
		out = append(out, ExtraArg{Name: a.Name, Value: ptr(v)})
	}
	value := func(name string) (string, bool) {
		if i, ok := index[name]; ok {
			return *out[i].Value, true
		}
		return "", false
	}
	set := func(name, v string) {
		if i, ok := index[name]; ok {
			out[i].Value = ptr(v)
			return
		}
		index[name] = len(out)
		out = append(out, ExtraArg{Name: name, Value: ptr(v)})
	}
	// ensure sets a file flag when absent or empty; an explicit path is
	// the operator's.
	ensure := func(name, v string) {
		if cur, ok := value(name); !ok || cur == "" {
			set(name, v)
		}
	}
	// ensureListed adds want to a comma-separated flag unless it is
	// there; an explicitly empty requestheader-allowed-names (any name) is
	// left alone.
	ensureListed := func(name, want string, emptyMeansAny bool) {
		cur, ok := value(name)
		switch {
		case !ok:
			set(name, want)
		case cur == "" && emptyMeansAny:
		case !containsFold(splitList(cur), want):
			set(name, strings.Join(append(splitList(cur), want), ","))
		}
	}

	// The gate first: on a 1.35 control plane the peer flags are refused
	// without it.
	gatesRaw, _ := value(flagFeatureGates)
	gates, err := parseFeatureGates(gatesRaw)
	if err != nil {
		gates = map[string]bool{}
	}
	v, verr := version.ParseGeneric(ver)
	needsGate := verr != nil || v.Minor() < 36
	if on, explicit := gates[GateMVP]; (needsGate && !on) || (explicit && !on) {
		gates[GateMVP] = true
	}
	if on, explicit := gates[GateAPIServerIdentity]; explicit && !on {
		gates[GateAPIServerIdentity] = true
	}
	if len(gates) > 0 {
		set(flagFeatureGates, formatFeatureGates(gates))
	}

	ensure(flagPeerCAFile, certDir+"/ca.crt")
	ensure(flagProxyClientCertFile, certDir+"/front-proxy-client.crt")
	ensure(flagProxyClientKeyFile, certDir+"/front-proxy-client.key")
	ensure(flagRequestHeaderClientCAFile, certDir+"/front-proxy-ca.crt")
	ensureListed(flagRequestHeaderAllowedNames, proxyClientCN(kcp, certDir), true)
	ensureListed(flagRequestHeaderUsernameHeaders, headerUser, false)
	ensureListed(flagRequestHeaderGroupHeaders, headerGroup, false)
	ensureListed(flagRequestHeaderExtraPrefix, headerExtraPrefix, false)
	// Graceful shutdown: the version bump that follows stops every
	// apiserver once. With the hand-off no delay (a stopping server would
	// proxy with its peer-endpoint store closed, answering 503); without
	// it a delay, so that the load balancer notices before the server
	// stops listening. Retry-After sends what still reaches it elsewhere.
	cur, ok := value(flagShutdownDelay)
	switch {
	case handoff && (!ok || cur == "" || positiveDuration(cur)):
		set(flagShutdownDelay, "0s")
	case !handoff && !positiveDuration(cur):
		set(flagShutdownDelay, "5s")
	}
	ensure(flagShutdownRetryAfter, "true")
	return out
}

// proxyClientCN is the CN of the proxy client certificate the apiserver
// presents to its peers: read from the KCP's files when it carries the
// certificate inline, else kubeadm's front-proxy-client.
func proxyClientCN(kcp *controlplanev1.KubeadmControlPlane, certDir string) string {
	p, ok := argsOf(kcp).get(flagProxyClientCertFile)
	if !ok || p == "" {
		return ProxyClientCN
	}
	if data, ok := inlineFile(kcp, p); ok {
		if cert := parseCert(data); cert != nil && cert.Subject.CommonName != "" {
			return cert.Subject.CommonName
		}
	}
	return ProxyClientCN
}

func wiringFindings(kcp *controlplanev1.KubeadmControlPlane) []Finding {
	args := argsOf(kcp)
	certDir := certificatesDir(kcp)
	defaults := kubeadmDefaults(certDir)
	var out []Finding
	add := func(sev Severity, reason, msg, evidence string, wire bool) {
		out = append(out, Finding{Check: CheckMVPWiring, Severity: sev, Reason: reason, Message: msg, Evidence: evidence, FixedByWireMVP: wire})
	}

	// peer-ca-file: kubeadm never sets it.
	switch v, ok := args.get(flagPeerCAFile); {
	case !ok || v == "":
		add(Blocker, ReasonPeerCAFileMissing,
			fmt.Sprintf("--%s is not set, so kube-apiserver does not build the Mixed Version Proxy (kubeadm never sets it, whatever the feature gate says): add extraArgs {name: %s, value: %s/ca.crt}, or set spec.wireMVP on the FleetUpgrade", flagPeerCAFile, flagPeerCAFile, certDir),
			evidenceArg(flagPeerCAFile, v, ok), true)
	case v != certDir+"/ca.crt":
		add(Warning, ReasonPeerCAFileNotClusterCA,
			fmt.Sprintf("--%s is %s, not the cluster CA %s/ca.crt that signs kubeadm's apiserver.crt: peers verify each other's serving certificate with it, so it must be the CA of the certificate in --tls-cert-file", flagPeerCAFile, v, certDir),
			evidenceArg(flagPeerCAFile, v, ok), false)
	default:
		add(Info, ReasonFlagSet, fmt.Sprintf("--%s is set", flagPeerCAFile), evidenceArg(flagPeerCAFile, v, ok), false)
	}

	// File flags kubeadm sets by default.
	for _, f := range []struct{ flag, reason, why string }{
		{flagProxyClientCertFile, ReasonProxyClientCertFileMissing, "kube-apiserver does not start with a peer CA and no proxy client certificate"},
		{flagProxyClientKeyFile, ReasonProxyClientKeyFileMissing, "kube-apiserver does not start with a peer CA and no proxy client key"},
		{flagRequestHeaderClientCAFile, ReasonRequestHeaderClientCAFileMissing, "a receiving apiserver cannot verify the proxying peer's client certificate, so proxied requests lose their user"},
	} {
		v, ok := args.get(f.flag)
		switch {
		case !ok:
			add(Info, ReasonKubeadmDefault,
				fmt.Sprintf("--%s is not in extraArgs; kubeadm's default %s applies, which MVP accepts", f.flag, defaults[f.flag]),
				evidenceArg(f.flag, v, ok), false)
		case v == "":
			add(Blocker, f.reason,
				fmt.Sprintf("--%s is set empty: %s. Set extraArgs {name: %s, value: %s}, or remove the entry to get kubeadm's default", f.flag, f.why, f.flag, defaults[f.flag]),
				evidenceArg(f.flag, v, ok), true)
		default:
			add(Info, ReasonFlagSet, fmt.Sprintf("--%s is set", f.flag), evidenceArg(f.flag, v, ok), false)
		}
	}

	// requestheader-allowed-names: the proxy's CN, or empty (any name).
	cn := proxyClientCN(kcp, certDir)
	if v, ok := args.get(flagRequestHeaderAllowedNames); !ok {
		add(Info, ReasonKubeadmDefault,
			fmt.Sprintf("--%s is not in extraArgs; kubeadm's default %s applies, which is the proxy client certificate's CN", flagRequestHeaderAllowedNames, ProxyClientCN),
			evidenceArg(flagRequestHeaderAllowedNames, v, ok), false)
	} else if v != "" && !containsFold(splitList(v), cn) {
		add(Blocker, ReasonRequestHeaderAllowedNamesExcludeProxy,
			fmt.Sprintf("--%s is %q and does not contain %s, the CN of the proxy client certificate: every apiserver would refuse the identity headers of requests its peers proxy. Set it to %q (or empty to accept any certificate the requestheader CA signed)", flagRequestHeaderAllowedNames, v, cn, strings.Join(append(splitList(v), cn), ",")),
			evidenceArg(flagRequestHeaderAllowedNames, v, ok), true)
	} else {
		add(Info, ReasonFlagSet, fmt.Sprintf("--%s accepts %s", flagRequestHeaderAllowedNames, cn), evidenceArg(flagRequestHeaderAllowedNames, v, ok), false)
	}

	// The identity headers the proxy sends.
	for _, h := range []struct{ flag, want, reason string }{
		{flagRequestHeaderUsernameHeaders, headerUser, ReasonRequestHeaderUsernameHeadersMismatch},
		{flagRequestHeaderGroupHeaders, headerGroup, ReasonRequestHeaderGroupHeadersMismatch},
		{flagRequestHeaderExtraPrefix, headerExtraPrefix, ReasonRequestHeaderExtraHeadersPrefixMismatch},
	} {
		v, ok := args.get(h.flag)
		switch {
		case !ok:
			add(Info, ReasonKubeadmDefault,
				fmt.Sprintf("--%s is not in extraArgs; kubeadm's default %s applies, which is what the proxy sends", h.flag, h.want),
				evidenceArg(h.flag, v, ok), false)
		case !containsFold(splitList(v), h.want):
			add(Blocker, h.reason,
				fmt.Sprintf("--%s is %q and does not contain %s, the header the Mixed Version Proxy sends: proxied requests would lose their identity. Add %s to it (or remove the entry to get kubeadm's default)", h.flag, v, h.want, h.want),
				evidenceArg(h.flag, v, ok), true)
		default:
			add(Info, ReasonFlagSet, fmt.Sprintf("--%s contains %s", h.flag, h.want), evidenceArg(h.flag, v, ok), false)
		}
	}
	return out
}

// gateEnabled reports whether the MVP gate is on for a server of minor
// version minor, given the feature-gates flag.
func gateEnabled(gates map[string]bool, minor uint) bool {
	if on, explicit := gates[GateMVP]; explicit {
		return on
	}
	return minor >= 36
}

func gateFindings(kcp *controlplanev1.KubeadmControlPlane, current *version.Version) []Finding {
	args := argsOf(kcp)
	raw, set := args.get(flagFeatureGates)
	ev := evidenceArg(flagFeatureGates, raw, set)
	mk := func(sev Severity, reason, msg string, wire bool) Finding {
		return Finding{Check: CheckFeatureGate, Severity: sev, Reason: reason, Message: msg, Evidence: ev, FixedByWireMVP: wire}
	}
	gates, err := parseFeatureGates(raw)
	if err != nil {
		return []Finding{mk(Blocker, ReasonFeatureGatesInvalid,
			fmt.Sprintf("the feature-gates extraArg does not parse (%v): write it as NAME=true|false pairs separated by commas", err), false)}
	}
	cur := fmt.Sprintf("%d.%d", current.Major(), current.Minor())
	var out []Finding
	on := gateEnabled(gates, current.Minor())
	explicit, isExplicit := gates[GateMVP]
	switch {
	case !on && current.Minor() < 36:
		out = append(out, mk(Blocker, ReasonFeatureGateOff,
			fmt.Sprintf("the control plane runs %s, where %s is alpha and off by default, and extraArgs do not turn it on: its apiservers answer 404 for resources only their upgraded peers serve, and publish no peer endpoint. Turn the gate on in a rollout of its own first (FleetUpgrade spec.wireMVP: true, or add %s=true to the feature-gates extraArg and let the control plane roll), then upgrade", cur, GateMVP, GateMVP),
			true))
	case !on:
		out = append(out, mk(Blocker, ReasonFeatureGateDisabled,
			fmt.Sprintf("the control plane runs %s, where %s is on by default, but the feature-gates extraArg sets it false: remove %s=false (FleetUpgrade spec.wireMVP does this in a rollout of its own)", cur, GateMVP, GateMVP),
			true))
	case isExplicit && explicit:
		out = append(out, mk(Info, ReasonFeatureGateOn, fmt.Sprintf("%s=true is set on %s", GateMVP, cur), false))
	default:
		out = append(out, mk(Info, ReasonFeatureGateOn, fmt.Sprintf("%s is on by default on %s", GateMVP, cur), false))
	}
	if id, explicit := gates[GateAPIServerIdentity]; explicit && !id {
		out = append(out, mk(Blocker, ReasonAPIServerIdentityDisabled,
			fmt.Sprintf("the feature-gates extraArg sets %s=false; the Mixed Version Proxy finds its peers through the identity leases this gate writes: remove %s=false", GateAPIServerIdentity, GateAPIServerIdentity),
			true))
	}
	if !on {
		var peerFlags []string
		for _, f := range []string{flagPeerAdvertiseIP, flagPeerAdvertisePort, flagPeerCAFile} {
			if v, ok := args.get(f); ok && v != "" {
				peerFlags = append(peerFlags, "--"+f)
			}
		}
		if len(peerFlags) > 0 {
			f := mk(Blocker, ReasonPeerFlagsWithGateOff,
				fmt.Sprintf("%s set while %s is off: kube-apiserver refuses to start (\"%s requires %s feature to be turned on\"), so any machine created from this spec never becomes ready. Turn the gate on in the same extraArgs (FleetUpgrade spec.wireMVP does both)", strings.Join(peerFlags, ", "), GateMVP, peerFlags[0], GateMVP),
				true)
			out = append(out, f)
		}
	}
	return out
}

func peerAddressFindings(kcp *controlplanev1.KubeadmControlPlane) []Finding {
	args := argsOf(kcp)
	ip, hasIP := args.get(flagPeerAdvertiseIP)
	port, hasPort := args.get(flagPeerAdvertisePort)
	hasIP, hasPort = hasIP && ip != "", hasPort && port != ""
	ev := evidenceArg(flagPeerAdvertiseIP, ip, hasIP) + "; " + evidenceArg(flagPeerAdvertisePort, port, hasPort)
	mk := func(sev Severity, reason, msg string) Finding {
		return Finding{Check: CheckPeerAddress, Severity: sev, Reason: reason, Message: msg, Evidence: ev}
	}
	var out []Finding
	if hasIP && replicas(kcp) > 1 {
		out = append(out, mk(Blocker, ReasonPeerAdvertiseIPShared,
			fmt.Sprintf("--%s=%s is in clusterConfiguration, which every control-plane machine shares: all %d apiservers would advertise one address to their peers. Remove it (peers then use each apiserver's --advertise-address), or set it per machine with a kubeadm patch", flagPeerAdvertiseIP, ip, replicas(kcp))))
	}
	switch {
	case hasIP != hasPort:
		out = append(out, mk(Warning, ReasonPeerAdvertiseIncomplete,
			fmt.Sprintf("only one of --%s and --%s is set: kube-apiserver uses them only together, so it ignores this one and advertises --advertise-address:--secure-port to its peers. Set both or neither", flagPeerAdvertiseIP, flagPeerAdvertisePort)))
	case !hasIP:
		out = append(out, mk(Info, ReasonPeerAdvertiseDefault,
			"peers reach each apiserver at its --advertise-address and --secure-port (kubeadm sets them per machine)"))
	}
	return out
}

// positiveDuration reports whether s is a duration longer than zero.
func positiveDuration(s string) bool {
	d, err := time.ParseDuration(s)
	return err == nil && d > 0
}

// The graceful-shutdown flags.
const (
	flagShutdownDelay      = "shutdown-delay-duration"
	flagShutdownRetryAfter = "shutdown-send-retry-after"
)

// shutdownFindings checks that an apiserver a rollout stops lets its
// clients go without failing their requests. With the load-balancer
// hand-off the server is out of the load balancer and drained before its
// machine goes, so it need not keep serving after SIGTERM, and with MVP
// wired it should not: it would proxy with its peer-endpoint store already
// closed. Without the hand-off only a delay keeps the load balancer's new
// connections from a server that stopped listening.
func shutdownFindings(kcp *controlplanev1.KubeadmControlPlane, handoff bool) []Finding {
	args := argsOf(kcp)
	delay, hasDelay := args.get(flagShutdownDelay)
	retry, hasRetry := args.get(flagShutdownRetryAfter)
	_, wired := args.get(flagPeerCAFile)
	ev := evidenceArg(flagShutdownDelay, delay, hasDelay) + "; " + evidenceArg(flagShutdownRetryAfter, retry, hasRetry)
	if !handoff {
		ev += "; no load-balancer hand-off"
	}
	mk := func(sev Severity, reason, msg string) Finding {
		return Finding{Check: CheckGracefulShutdown, Severity: sev, Reason: reason, Message: msg, Evidence: ev}
	}
	delayed := hasDelay && positiveDuration(delay)
	var out []Finding
	switch {
	case handoff && wired && delayed:
		out = append(out, mk(Warning, ReasonShutdownDelayBreaksPeerProxy,
			"--shutdown-delay-duration is "+delay+" with MVP wired: for that long after SIGTERM a stopping apiserver keeps serving with its peer-endpoint store already closed, so every request it would proxy to a peer gets \"503 Error getting ip and port info of the remote server while proxying\". The load-balancer hand-off takes the server out of the load balancer and drains it before its machine is deleted; set it to 0s in apiServer.extraArgs (the wire-MVP step does) and keep --shutdown-send-retry-after=true"))
	case !handoff && !delayed:
		msg := "--shutdown-delay-duration is 0 and nothing takes an apiserver out of the load balancer before it stops (the load-balancer hand-off runs on Hetzner; a LocalCluster drains a machine itself): the load balancer keeps sending new connections to a server that no longer listens until its health check notices. Set it in apiServer.extraArgs to a few seconds more than the load balancer's health-check interval"
		if wired {
			msg += ", knowing that during the delay the server answers 503 to every request it would proxy to a peer (its peer-endpoint store is closed already); a load balancer that drains a server on demand avoids both"
		}
		out = append(out, mk(Warning, ReasonShutdownDelayUnset, msg))
	}
	if !hasRetry || retry != "true" {
		out = append(out, mk(Warning, ReasonShutdownRetryAfterUnset,
			"--shutdown-send-retry-after is not true: requests that reach an apiserver while it drains get a 503 instead of a 429 with Retry-After, which client-go and kubectl retry on their own. Set it to \"true\" in apiServer.extraArgs"))
	}
	if len(out) == 0 {
		out = append(out, mk(Info, ReasonGracefulShutdown, "a stopping apiserver lets its clients go: --shutdown-send-retry-after=true, and the shutdown delay suits the load-balancer hand-off (or its absence)"))
	}
	return out
}

func servingCertFindings(kcp *controlplanev1.KubeadmControlPlane) []Finding {
	args := argsOf(kcp)
	certDir := certificatesDir(kcp)
	def := kubeadmDefaults(certDir)[flagTLSCertFile]
	p, ok := args.get(flagTLSCertFile)
	sans := strings.Join(kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.CertSANs, ",")
	if !ok || p == "" || p == def {
		return []Finding{{Check: CheckServingCertificate, Severity: Info, Reason: ReasonServingCertificateKubeadm,
			Message:  fmt.Sprintf("the apiservers serve kubeadm's %s, which always carries %s (apiServer.certSANs only adds names to it): peers can verify each other", def, PeerServerName),
			Evidence: fmt.Sprintf("--%s=%s; certSANs=[%s]", flagTLSCertFile, def, sans)}}
	}
	ev := evidenceArg(flagTLSCertFile, p, ok)
	data, inline := inlineFile(kcp, p)
	if !inline {
		return []Finding{{Check: CheckServingCertificate, Severity: Warning, Reason: ReasonServingCertificateUnverified,
			Message:  fmt.Sprintf("the apiservers serve a custom certificate %s whose content the KubeadmControlPlane does not show: peers verify it for %s, so check it carries that name (openssl x509 -noout -ext subjectAltName -in %s on a control-plane machine) and is signed by --%s", p, PeerServerName, p, flagPeerCAFile),
			Evidence: ev}}
	}
	cert := parseCert(data)
	switch {
	case cert == nil:
		return []Finding{{Check: CheckServingCertificate, Severity: Warning, Reason: ReasonServingCertificateUnverified,
			Message:  fmt.Sprintf("the custom serving certificate %s in kubeadmConfigSpec.files is not a PEM certificate this check can read: check by hand that it carries %s", p, PeerServerName),
			Evidence: ev}}
	case !containsFold(cert.DNSNames, PeerServerName):
		return []Finding{{Check: CheckServingCertificate, Severity: Blocker, Reason: ReasonServingCertificateMissingName,
			Message:  fmt.Sprintf("the custom serving certificate %s does not carry %s, the name peers verify each other for: every proxied request would fail with a TLS error (503). Reissue it with that DNS name, or drop --%s to use kubeadm's apiserver.crt", p, PeerServerName, flagTLSCertFile),
			Evidence: fmt.Sprintf("%s; DNS names [%s]", ev, strings.Join(cert.DNSNames, ","))}}
	default:
		return []Finding{{Check: CheckServingCertificate, Severity: Info, Reason: ReasonServingCertificateNamed,
			Message:  fmt.Sprintf("the custom serving certificate %s carries %s", p, PeerServerName),
			Evidence: fmt.Sprintf("%s; DNS names [%s]", ev, strings.Join(cert.DNSNames, ","))}}
	}
}

func parseCert(data []byte) *x509.Certificate {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil
		}
		return cert
	}
}

func hostnameFindings(kcp *controlplanev1.KubeadmControlPlane, machines []clusterv1.Machine) []Finding {
	byHost := map[string][]string{}
	var unknown []string
	for i := range machines {
		m := &machines[i]
		if owner, ok := m.Labels[clusterv1.MachineControlPlaneNameLabel]; ok && owner != kcp.Name {
			continue
		}
		h := hostnameOf(m)
		if h == "" {
			unknown = append(unknown, m.Name)
			continue
		}
		byHost[h] = append(byHost[h], m.Name)
	}
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var out []Finding
	for _, h := range hosts {
		ms := byHost[h]
		if len(ms) < 2 {
			continue
		}
		sort.Strings(ms)
		out = append(out, Finding{Check: CheckHostnames, Severity: Blocker, Reason: ReasonDuplicateHostname,
			Message:  fmt.Sprintf("control-plane machines %s share the hostname %s: the apiserver identity lease is per hostname, so these apiservers take each other for themselves and never proxy to each other. Give every control-plane machine its own hostname (the infrastructure template's naming, or nodeRegistration.name)", strings.Join(ms, ", "), h),
			Evidence: fmt.Sprintf("hostname %s: machines %s", h, strings.Join(ms, ","))})
	}
	sort.Strings(unknown)
	for _, m := range unknown {
		out = append(out, Finding{Check: CheckHostnames, Severity: Warning, Reason: ReasonHostnameUnknown,
			Message:  fmt.Sprintf("control-plane machine %s has no node and no Hostname address yet, so its hostname cannot be compared with the others: wait until it has joined, then run preflight again", m),
			Evidence: "machine " + m})
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: CheckHostnames, Severity: Info, Reason: ReasonHostnamesUnique,
			Message: fmt.Sprintf("%d control-plane machines, each with its own hostname", len(hosts)), Evidence: strings.Join(hosts, ",")})
	}
	return out
}

// hostnameOf is the Machine's node name, else its Hostname address.
func hostnameOf(m *clusterv1.Machine) string {
	if m.Status.NodeRef.Name != "" {
		return m.Status.NodeRef.Name
	}
	for _, a := range m.Status.Addresses {
		if a.Type == clusterv1.MachineHostName && a.Address != "" {
			return a.Address
		}
	}
	return ""
}

func replicas(kcp *controlplanev1.KubeadmControlPlane) int32 {
	if kcp.Spec.Replicas == nil {
		return 1
	}
	return *kcp.Spec.Replicas
}

// maxSurge returns the rollout's maxSurge (Cluster API defaults it to 1)
// and its raw form.
func maxSurge(kcp *controlplanev1.KubeadmControlPlane) (int, string, bool) {
	ms := kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge
	if ms == nil {
		return 1, "unset (defaults to 1)", true
	}
	if ms.Type == intstr.Int {
		return ms.IntValue(), ms.String(), true
	}
	n, err := strconv.Atoi(ms.StrVal)
	return n, ms.String(), err == nil
}

// rolloutFindings returns the rollout strategy's findings and whether the
// rollout surges (creates a machine before deleting one).
func rolloutFindings(kcp *controlplanev1.KubeadmControlPlane) ([]Finding, bool) {
	n, raw, ok := maxSurge(kcp)
	r := replicas(kcp)
	ev := fmt.Sprintf("maxSurge=%s; replicas=%d", raw, r)
	mk := func(sev Severity, reason, msg string) []Finding {
		return []Finding{{Check: CheckRolloutStrategy, Severity: sev, Reason: reason, Message: msg, Evidence: ev}}
	}
	switch {
	case !ok || (n != 0 && n != 1):
		return mk(Blocker, ReasonMaxSurgeUnsupported,
			"spec.rollout.strategy.rollingUpdate.maxSurge must be 0 or 1: set it to 0 (with 3 or more replicas) to replace machines in place, or 1 to surge"), false
	case n == 0 && r < 3:
		return mk(Blocker, ReasonMaxSurgeZeroTooFewReplicas,
			fmt.Sprintf("maxSurge 0 deletes a control-plane machine before creating its replacement, which needs at least 3 replicas so that etcd keeps its quorum and the cluster an apiserver while one machine is gone; this control plane has %d. Scale it to 3 (spec.replicas: 3) or set maxSurge to 1", r)), false
	case n == 0:
		return mk(Info, ReasonMaxSurgeZero,
			fmt.Sprintf("maxSurge 0: each of the %d machines is deleted before its replacement is created, so the control plane runs %d apiservers during each step", r, r-1)), false
	default:
		return mk(Info, ReasonMaxSurgeOne,
			fmt.Sprintf("maxSurge 1: a replacement is created before each of the %d machines is deleted, so the account needs room for one more server", r)), true
	}
}

func capacityFindings(ctx context.Context, in Input, surge bool, capacity Capacity) []Finding {
	mk := func(sev Severity, reason, msg, ev string) []Finding {
		return []Finding{{Check: CheckSurgeCapacity, Severity: sev, Reason: reason, Message: msg, Evidence: ev}}
	}
	if !surge {
		return mk(Info, ReasonSurgeCapacityNotNeeded, "maxSurge is not 1: the rollout needs no extra server", "")
	}
	if capacity == nil {
		return mk(Warning, ReasonSurgeCapacityUnchecked,
			"maxSurge 1 needs room for one more control-plane server, and no capacity source is configured for this cluster: check the cloud account's limits by hand", "")
	}
	c, err := capacity.SurgeCapacity(ctx, in.Cluster, in.ControlPlane)
	switch {
	case err != nil:
		return mk(Warning, ReasonSurgeCapacityUnknown,
			fmt.Sprintf("maxSurge 1 needs room for one more control-plane server, and the capacity could not be read: %v. Check the cloud account by hand, or set maxSurge to 0 (with 3 or more replicas)", err), "")
	case !c.Available:
		return mk(Blocker, ReasonInsufficientCapacity,
			fmt.Sprintf("maxSurge 1 needs one more control-plane server, and the account cannot create it: %s. Free room in the account, pick a server type and location that are available, or set maxSurge to 0 (with 3 or more replicas)", c.Message), c.Evidence)
	default:
		return mk(Info, ReasonSurgeCapacityAvailable, "the account can create the surge server: "+c.Message, c.Evidence)
	}
}

func evidenceArg(name, value string, set bool) string {
	if !set {
		return name + " not in extraArgs"
	}
	return fmt.Sprintf("%s=%q", name, value)
}
