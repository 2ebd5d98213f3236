package preflight

import (
	"encoding/base64"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
)

// ExtraArg is one entry of a KubeadmControlPlane's
// kubeadmConfigSpec.clusterConfiguration.apiServer.extraArgs, a list of
// {name, value} in Cluster API v1beta2.
type ExtraArg = bootstrapv1.Arg

// kube-apiserver flags the checks read, without leading dashes.
const (
	flagPeerCAFile                   = "peer-ca-file"
	flagPeerAdvertiseIP              = "peer-advertise-ip"
	flagPeerAdvertisePort            = "peer-advertise-port"
	flagProxyClientCertFile          = "proxy-client-cert-file"
	flagProxyClientKeyFile           = "proxy-client-key-file"
	flagRequestHeaderClientCAFile    = "requestheader-client-ca-file"
	flagRequestHeaderAllowedNames    = "requestheader-allowed-names"
	flagRequestHeaderUsernameHeaders = "requestheader-username-headers"
	flagRequestHeaderGroupHeaders    = "requestheader-group-headers"
	flagRequestHeaderExtraPrefix     = "requestheader-extra-headers-prefix"
	flagFeatureGates                 = "feature-gates"
	flagTLSCertFile                  = "tls-cert-file"
)

// Names kube-apiserver and kubeadm use.
const (
	// GateMVP is the Mixed Version Proxy's feature gate.
	GateMVP = "UnknownVersionInteroperabilityProxy"
	// GateAPIServerIdentity is the gate MVP depends on.
	GateAPIServerIdentity = "APIServerIdentity"
	// ProxyClientCN is the CN of kubeadm's front-proxy-client.crt.
	ProxyClientCN = "front-proxy-client"
	// PeerServerName is the name peers verify each other's serving
	// certificate for.
	PeerServerName = "kubernetes.default.svc"
	// DefaultCertificatesDir is kubeadm's certificatesDir default.
	DefaultCertificatesDir = "/etc/kubernetes/pki"

	headerUser        = "X-Remote-User"
	headerGroup       = "X-Remote-Group"
	headerExtraPrefix = "X-Remote-Extra-"
)

// apiServerArgs is the apiserver's extraArgs by name; a nil Value reads as "".
type apiServerArgs map[string]string

func argsOf(kcp *controlplanev1.KubeadmControlPlane) apiServerArgs {
	out := apiServerArgs{}
	for _, a := range kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs {
		v := ""
		if a.Value != nil {
			v = *a.Value
		}
		out[a.Name] = v
	}
	return out
}

func (a apiServerArgs) get(name string) (string, bool) {
	v, ok := a[name]
	return v, ok
}

func certificatesDir(kcp *controlplanev1.KubeadmControlPlane) string {
	if d := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.CertificatesDir; d != "" {
		return d
	}
	return DefaultCertificatesDir
}

// kubeadmDefaults are the values kubeadm gives the flags MVP needs (see
// kubeadm's getAPIServerCommand); --peer-ca-file is not among them.
func kubeadmDefaults(certDir string) map[string]string {
	return map[string]string{
		flagProxyClientCertFile:          path.Join(certDir, "front-proxy-client.crt"),
		flagProxyClientKeyFile:           path.Join(certDir, "front-proxy-client.key"),
		flagRequestHeaderClientCAFile:    path.Join(certDir, "front-proxy-ca.crt"),
		flagRequestHeaderAllowedNames:    ProxyClientCN,
		flagRequestHeaderUsernameHeaders: headerUser,
		flagRequestHeaderGroupHeaders:    headerGroup,
		flagRequestHeaderExtraPrefix:     headerExtraPrefix,
		flagTLSCertFile:                  path.Join(certDir, "apiserver.crt"),
	}
}

// parseFeatureGates reads "A=true,B=false".
func parseFeatureGates(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not NAME=true|false", part)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("%q is not NAME=true|false", part)
		}
		out[strings.TrimSpace(name)] = b
	}
	return out, nil
}

func formatFeatureGates(gates map[string]bool) string {
	names := make([]string, 0, len(gates))
	for n := range gates {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+strconv.FormatBool(gates[n]))
	}
	return strings.Join(parts, ",")
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func containsFold(list []string, want string) bool {
	for _, v := range list {
		if strings.EqualFold(v, want) {
			return true
		}
	}
	return false
}

// inlineFile returns the content of a file the KCP writes onto its
// machines at path, when the KCP carries it inline (not from a Secret).
func inlineFile(kcp *controlplanev1.KubeadmControlPlane, p string) ([]byte, bool) {
	for _, f := range kcp.Spec.KubeadmConfigSpec.Files {
		if f.Path != p || f.Content == "" {
			continue
		}
		switch f.Encoding {
		case "":
			return []byte(f.Content), true
		case bootstrapv1.Base64:
			b, err := base64.StdEncoding.DecodeString(f.Content)
			return b, err == nil
		default:
			return nil, false
		}
	}
	return nil, false
}

func ptr(s string) *string { return &s }
