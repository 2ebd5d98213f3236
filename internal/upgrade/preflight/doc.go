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
//     is per hostname), the rollout strategy, and the capacity to surge.
//
// Everything but the capacity is a pure function of the objects; capacity
// comes through the small Capacity interface (HetznerCapacity adapts
// internal/hetzner). MVPWired and WireMVPPatch serve the FleetUpgrade's
// wire-MVP step: whether a control plane is wired, and the extraArgs to set
// when it is not. The package never writes anything.
package preflight
