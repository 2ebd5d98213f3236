// Package preflight checks one Cluster API cluster before the FleetUpgrade
// controller bumps its Kubernetes version, and says what an operator must
// fix first.
//
// Run reads the cluster's KubeadmControlPlane (v1beta2) and control-plane
// Machines and returns a list of Findings, each with the check that produced
// it, a Severity (a Blocker stops the upgrade of that cluster), a CamelCase
// Reason constant, a Message that says what is wrong and exactly what to do,
// and the Evidence it was read from. The checks follow what kube-apiserver
// and kubeadm actually do (see ../shared/mvp-facts.md and docs/upgrades.md):
//
//   - MVP wiring: --peer-ca-file (kubeadm never sets it, so without it the
//     Mixed Version Proxy is off whatever the gate says), the proxy client
//     certificate and the requestheader flags (kubeadm's defaults are right;
//     an override that breaks them is a Blocker);
//   - the UnknownVersionInteroperabilityProxy gate on the version the control
//     plane runs now (alpha and off before 1.36, on from 1.36 unless set
//     false), and --peer-* flags with the gate off, which kube-apiserver
//     refuses at startup;
//   - the peer advertise address, the serving certificate's name
//     kubernetes.default.svc, unique apiserver hostnames (the identity lease
//     is per hostname);
//   - graceful shutdown: --shutdown-send-retry-after, and a
//     --shutdown-delay-duration that suits whether the load-balancer
//     hand-off runs (Input.LoadBalancerHandoff);
//   - the rollout strategy, and the capacity to surge.
//
// A control plane missing, or whose version cannot be read, is a Blocker of
// its own (CheckVersion) and nothing else is checked.
//
// Everything but the capacity is a pure function of the objects; capacity
// comes through the small Capacity interface (HetznerCapacity adapts
// internal/hetzner). WireMVPPatch serves the FleetUpgrade's wire-MVP step:
// the extraArgs that wire MVP and graceful shutdown; a Finding says whether
// that step fixes it (FixedByWireMVP), and OnlyWireMVPBlockers whether the
// step is all a cluster needs. MVPWired answers whether a control plane is
// wired now, for the API's fleet view. The package never writes anything.
package preflight
