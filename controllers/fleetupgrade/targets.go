package fleetupgrade

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/internal/upgrade/verify"
)

// DefaultAPIServerPort is the apiservers' port when neither the options nor
// the Cluster's controlPlaneEndpoint give one.
const DefaultAPIServerPort = 6443

// addressPreference is the order in which a Machine's addresses are tried.
var addressPreference = []clusterv1.MachineAddressType{clusterv1.MachineInternalIP, clusterv1.MachineExternalIP}

// Targets returns one verifier target per serving control-plane machine
// (not being deleted, or held by GateHook: KubeadmControlPlane marked it,
// and it serves until its gate releases it; with an InternalIP or, failing
// that, an ExternalIP),
// sorted by name. Each is base with the server replaced by
// https://ADDRESS:port and, unless base names one, the TLS server name set
// to kubernetes.default.svc, which every kubeadm apiserver certificate
// carries whatever address it is reached at. A target's name is the
// machine's node name, else its Hostname address, else the Machine's name:
// the verifier tells an apiserver's own identity lease by its hostname.
// Machines that have not joined (no Node yet) and have no usable address
// are returned in skipped. It fails when base is nil, when no machine has an
// address, or when a machine that joined has none: its apiserver serves
// tenants, and a round that cannot probe it must not pass.
func Targets(base *rest.Config, port int32, machines []clusterv1.Machine) (targets []verify.Target, skipped []string, err error) {
	if base == nil {
		return nil, nil, errors.New("no rest config for the cluster")
	}
	if port <= 0 {
		port = DefaultAPIServerPort
	}
	names := map[string]bool{}
	var unprobeable []string
	for i := range machines {
		m := &machines[i]
		if !m.DeletionTimestamp.IsZero() && !gated(m) {
			continue
		}
		addr := machineIP(m)
		if addr == "" && m.Status.NodeRef.Name != "" {
			unprobeable = append(unprobeable, fmt.Sprintf("%s (node %s)", m.Name, m.Status.NodeRef.Name))
			continue
		}
		if addr == "" {
			skipped = append(skipped, m.Name)
			continue
		}
		cfg := rest.CopyConfig(base)
		cfg.Host = "https://" + net.JoinHostPort(addr, strconv.Itoa(int(port)))
		cfg.APIPath = ""
		if cfg.TLSClientConfig.ServerName == "" && !cfg.TLSClientConfig.Insecure {
			cfg.TLSClientConfig.ServerName = preflight.PeerServerName
		}
		name := targetName(m)
		if names[name] {
			name = m.Name
		}
		names[name] = true
		targets = append(targets, verify.Target{Name: name, Config: cfg})
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].Name < targets[j].Name })
	sort.Strings(skipped)
	if len(unprobeable) > 0 {
		sort.Strings(unprobeable)
		return nil, skipped, fmt.Errorf("machines %s joined the cluster but have no InternalIP or ExternalIP address: their apiservers cannot be probed (the infrastructure provider sets a Machine's addresses)",
			strings.Join(unprobeable, ", "))
	}
	if len(targets) == 0 {
		return nil, skipped, fmt.Errorf("no control-plane machine has an InternalIP or ExternalIP address (machines without one: %v)", skipped)
	}
	return targets, skipped, nil
}

func machineIP(m *clusterv1.Machine) string {
	for _, typ := range addressPreference {
		for _, a := range m.Status.Addresses {
			if a.Type == typ && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

func targetName(m *clusterv1.Machine) string {
	if m.Status.NodeRef.Name != "" {
		return m.Status.NodeRef.Name
	}
	for _, a := range m.Status.Addresses {
		if a.Type == clusterv1.MachineHostName && a.Address != "" {
			return a.Address
		}
	}
	return m.Name
}
