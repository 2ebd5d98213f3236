// Package controlplane starts real Kubernetes control planes on this machine:
// one etcd and any number of kube-apiservers, each at any pinned version (see
// internal/kubebin), for tests and for embedded mode.
//
// Each apiserver runs in its own UTS namespace with its own hostname, because
// an apiserver's identity lease is derived from the hostname and two servers
// with one hostname take each other for "self" and never proxy. Each listens on
// its own loopback address (127.0.0.11, .12, …, like machines of a real
// control plane) with a serving certificate that carries the names the Mixed
// Version Proxy checks (kubernetes.default.svc). When an apiserver is started
// with MVP wired, it gets the flags mvp-facts.md lists: --peer-ca-file, the
// front-proxy client certificate and the requestheader settings, and on 1.35
// the UnknownVersionInteroperabilityProxy gate.
//
// With Options.LoadBalancer a TCP load balancer (internal/tcplb) listens at
// LoadBalancerIP (127.0.0.10) in front of the apiservers, as a cloud load
// balancer does, and the plane's endpoint is the load balancer. It follows
// what CAPH does on Hetzner: a started apiserver joins it once its /readyz
// answers 200 and, when it runs the Mixed Version Proxy, once every other
// wired apiserver's peer-merged discovery lists what it serves
// (mvp.WaitListedByPeers: the peer-sync gate); a stopped one is first taken
// out of it and drained, then stopped; a killed one is taken out once it is
// dead, and its identity lease is removed through a survivor at once
// (mvp.RemoveIdentityLease), as when its process exits unasked.
//
// StartControllers adds what a kubeadm control-plane node runs beside the
// apiserver: kube-controller-manager and kube-scheduler of the same pinned
// sources, each with the identity kubeadm gives it, so that Deployments get
// their Pods and Pods get bound to a Node (bex-node's, package node).
//
// etcd runs as an Etcd of its own (StartEtcd), which a local fleet's
// cluster also uses as its external etcd.
//
// etcd listens on 127.0.0.1 over TLS only, for clients and for peers, and
// answers only those that present a certificate of its own CA (not the
// cluster CA, whose client certificates UserConfig hands out): the
// apiservers get one with --etcd-certfile, and EtcdClient gives its files to
// any other client (bex-apiserver). A process on the machine without it
// cannot read or write the cluster's state. Certificates missing from a
// DataDir (one from before etcd asked for them) are issued on start.
//
// A plane's etcd, load balancer and authorities (Authorities) are what a
// local fleet's cluster takes over when Cluster API is to manage the plane
// itself (internal/localfleet's RegisterPlane).
//
// A ControlPlane writes an admin kubeconfig, hands out rest.Configs for the
// whole plane and for each apiserver, replaces and kills apiservers one at a
// time (what a maxSurge-0 rollout does), and tears everything down without
// leaving a process behind. With a DataDir the plane keeps its etcd data,
// certificates and ports across restarts.
package controlplane
