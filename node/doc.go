// Package node is bex-node, the node agent of a local workload cluster's
// worker machines: a small kubelet for bex's own workloads.
//
// An Agent registers its Node (capacity, addresses, its API's port, Ready)
// and renews the Node's Lease in kube-node-lease, then runs the Pods bound
// to it: each Pod's one container is a runc container of internal/sandbox
// (its own namespaces, the tenant's uid range, cgroup limits from the
// container's resource limits), from an image pulled from a registry with
// the Pod's image pull secrets or the node's own credentials and unpacked
// once per tenant and image, then deleted once no container has used it
// for Options.ImageMinimumGCAge, as the kubelet's image garbage
// collection does. The container's address on the sandbox bridge is the
// Pod's IP. The Agent runs readiness and liveness probes (HTTP GET
// and TCP), restarts containers by the Pod's restart policy with back-off,
// fails a Pod past its activeDeadlineSeconds, lowered on a running Pod
// too (DeadlineExceeded: its container stopped, the Pod and its log kept),
// reports the Pod's phase, conditions and container statuses, and stops a
// deleted Pod's container within its grace period (its preStop sleep,
// during which it still serves while the EndpointSlices already mark it
// terminating, then SIGTERM, then SIGKILL) before it removes the Pod for
// good, as the kubelet does.
//
// An Agent that stops leaves its containers running, as a kubelet does
// (sandbox.Process: a shim per container that outlives the agent); the
// next Agent of the same StateDir and sandbox Owner adopts those whose Pod
// is still bound to the node with the same UID and container spec (their
// process, status, log, volumes, image and probes go on), counts a
// restart of those that exited meanwhile, and stops and removes the rest
// (adopt.go). Reset removes what the agents of a StateDir left.
//
// It serves the kubelet's log endpoint (/containerLogs/NS/POD/CONTAINER)
// and the Summary API's CPU and memory of running Pods (/stats/summary,
// read from the containers' cgroups) over TLS to clients whose
// certificate a configured CA signed and whom the apiserver authorizes for
// nodes/proxy, or nodes/stats for /stats (a SubjectAccessReview), so that
// `kubectl logs` and the kube runtime driver's logs and usage work.
//
// It serves the kubelet's attach endpoint (/attach/NS/POD/CONTAINER, the
// remotecommand protocol over SPDY, to clients authorized to create
// nodes/proxy) for containers made with stdin, on a terminal with tty:
// `kubectl attach` and the kube driver's one-off runs with input. Unlike
// the kubelet, it holds the process of a stdinOnce container until its
// first attach (Options.AttachWait at most), so that none of its output
// is lost. It serves no exec. What it does not run (more than one container, init
// containers, volumes, exec or gRPC probes, startup probes, lifecycle
// hooks but a preStop sleep, stop signals, host namespaces, privileged
// containers, added capabilities, host ports) it
// refuses: the Pod fails with reason Unsupported and a Warning Event says
// what to change. docs/fleet.md lists the differences to a kubelet.
//
// The Agent talks to the apiserver as the node (system:node:NAME in
// system:nodes), so the Node authorizer and NodeRestriction keep it to its
// own Node, its own Pods and the Secrets and ConfigMaps they name.
package node
