package localfleet

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// What a kubeadm node reads from its bootstrap data: the cloud-config that
// Cluster API's kubeadm bootstrap provider (CABPK) writes, and in it the
// kubeadm configuration. Only what a control-plane machine of this machine
// uses is read; the rest (runcmd, users, ntp, …) is for a real host.

// kubeadmAPIVersion is the kubeadm configuration version CABPK writes for
// Kubernetes 1.31 and later, the only one read.
const kubeadmAPIVersion = "kubeadm.k8s.io/v1beta4"

// Files of the bootstrap data a kubeadm node acts on.
const (
	initConfigPath = "/run/kubeadm/kubeadm.yaml"
	joinConfigPath = "/run/kubeadm/kubeadm-join-config.yaml"
)

// maxBootstrapData bounds the bootstrap data read: CABPK's is a few tens of
// kilobytes (certificates and configuration).
const maxBootstrapData = 4 << 20

// cloudConfig is the part of a cloud-config read here.
type cloudConfig struct {
	WriteFiles []cloudFile `json:"write_files"`
}

type cloudFile struct {
	Path        string `json:"path"`
	Encoding    string `json:"encoding"`
	Permissions string `json:"permissions"`
	Content     string `json:"content"`
	Append      bool   `json:"append"`
}

// bootstrapFile is one file of the bootstrap data, decoded.
type bootstrapFile struct {
	Path    string
	Mode    os.FileMode
	Content []byte
	Append  bool
}

// parseCloudConfig reads the files a cloud-config writes.
func parseCloudConfig(data []byte) ([]bootstrapFile, error) {
	if len(data) > maxBootstrapData {
		return nil, fmt.Errorf("bootstrap data is %d bytes, more than %d", len(data), maxBootstrapData)
	}
	var cc cloudConfig
	if err := yaml.Unmarshal(data, &cc); err != nil {
		return nil, fmt.Errorf("reading the bootstrap data as cloud-config: %w", err)
	}
	var out []bootstrapFile
	for _, f := range cc.WriteFiles {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || strings.Contains(f.Path, "..") {
			return nil, fmt.Errorf("bootstrap data writes %q: only clean absolute paths are taken", f.Path)
		}
		content, err := decodeContent(f.Encoding, f.Content)
		if err != nil {
			return nil, fmt.Errorf("bootstrap file %s: %w", f.Path, err)
		}
		mode := os.FileMode(0o644)
		if f.Permissions != "" {
			m, err := strconv.ParseUint(f.Permissions, 8, 32)
			if err != nil {
				return nil, fmt.Errorf("bootstrap file %s: permissions %q: %w", f.Path, f.Permissions, err)
			}
			mode = os.FileMode(m) & 0o777
		}
		out = append(out, bootstrapFile{Path: f.Path, Mode: mode, Content: content, Append: f.Append})
	}
	return out, nil
}

// decodeContent decodes a write_files entry as cloud-init does.
func decodeContent(encoding, content string) ([]byte, error) {
	switch encoding {
	case "", "text/plain":
		return []byte(content), nil
	case "b64", "base64":
		return base64.StdEncoding.DecodeString(content)
	case "gz", "gzip", "gz+b64", "gz+base64", "gzip+b64", "gzip+base64":
		raw := []byte(content)
		if strings.Contains(encoding, "b") {
			var err error
			if raw, err = base64.StdEncoding.DecodeString(content); err != nil {
				return nil, err
			}
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(io.LimitReader(zr, maxBootstrapData))
	default:
		return nil, fmt.Errorf("encoding %q is not one cloud-init knows", encoding)
	}
}

// writeFiles writes the files under root, as cloud-init writes them under /.
func writeFiles(root string, files []bootstrapFile) error {
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if f.Append {
			flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
		}
		w, err := os.OpenFile(p, flag, f.Mode)
		if err != nil {
			return err
		}
		_, err = w.Write(f.Content)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
	}
	return nil
}

// arg is one entry of kubeadm v1beta4's extraArgs.
type arg struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// clusterConfiguration is what is read of kubeadm's ClusterConfiguration.
type clusterConfiguration struct {
	APIVersion           string `json:"apiVersion"`
	Kind                 string `json:"kind"`
	KubernetesVersion    string `json:"kubernetesVersion"`
	CertificatesDir      string `json:"certificatesDir"`
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint"`
	ClusterName          string `json:"clusterName"`
	Networking           struct {
		ServiceSubnet string `json:"serviceSubnet"`
		PodSubnet     string `json:"podSubnet"`
		DNSDomain     string `json:"dnsDomain"`
	} `json:"networking"`
	APIServer struct {
		ExtraArgs []arg    `json:"extraArgs"`
		CertSANs  []string `json:"certSANs"`
	} `json:"apiServer"`
	ControllerManager struct {
		ExtraArgs []arg `json:"extraArgs"`
	} `json:"controllerManager"`
	Scheduler struct {
		ExtraArgs []arg `json:"extraArgs"`
	} `json:"scheduler"`
	Etcd struct {
		External *struct {
			Endpoints []string `json:"endpoints"`
			CAFile    string   `json:"caFile"`
			CertFile  string   `json:"certFile"`
			KeyFile   string   `json:"keyFile"`
		} `json:"external"`
	} `json:"etcd"`
}

// certDir is certificatesDir with kubeadm's default.
func (c *clusterConfiguration) certDir() string {
	if c.CertificatesDir != "" {
		return c.CertificatesDir
	}
	return "/etc/kubernetes/pki"
}

func (c *clusterConfiguration) serviceSubnet() string {
	if c.Networking.ServiceSubnet != "" {
		return c.Networking.ServiceSubnet
	}
	return "10.96.0.0/12"
}

// clusterName is clusterName with kubeadm's default.
func (c *clusterConfiguration) clusterName() string {
	if c.ClusterName != "" {
		return c.ClusterName
	}
	return "kubernetes"
}

func (c *clusterConfiguration) dnsDomain() string {
	if c.Networking.DNSDomain != "" {
		return c.Networking.DNSDomain
	}
	return "cluster.local"
}

// nodeRegistration is what is read of kubeadm's nodeRegistration.
type nodeRegistration struct {
	Name string `json:"name"`
	// Taints nil means kubeadm's default: the control-plane taint on a
	// control-plane machine, none on a worker; an empty list means none.
	Taints *[]corev1.Taint `json:"taints"`
	// KubeletExtraArgs are the kubelet's flags beyond kubeadm's: of them
	// node-labels and register-with-taints are taken.
	KubeletExtraArgs []arg `json:"kubeletExtraArgs,omitempty"`
}

type apiEndpoint struct {
	AdvertiseAddress string `json:"advertiseAddress"`
	BindPort         int32  `json:"bindPort"`
}

type initConfiguration struct {
	NodeRegistration nodeRegistration `json:"nodeRegistration"`
	LocalAPIEndpoint apiEndpoint      `json:"localAPIEndpoint"`
}

type joinConfiguration struct {
	NodeRegistration nodeRegistration `json:"nodeRegistration"`
	Discovery        struct {
		BootstrapToken *struct {
			APIServerEndpoint string `json:"apiServerEndpoint"`
			Token             string `json:"token"`
		} `json:"bootstrapToken"`
	} `json:"discovery"`
	ControlPlane *struct {
		LocalAPIEndpoint apiEndpoint `json:"localAPIEndpoint"`
	} `json:"controlPlane"`
}

// kubeadmConfig is the kubeadm configuration of one machine's bootstrap
// data: an init (ClusterConfiguration and InitConfiguration) or a
// control-plane join (JoinConfiguration; the ClusterConfiguration then
// comes from the cluster's kubeadm-config ConfigMap).
type kubeadmConfig struct {
	Init *initConfiguration
	Join *joinConfiguration
	// Cluster is nil for a join until read from the cluster.
	Cluster *clusterConfiguration
	// ClusterYAML is the ClusterConfiguration document as the bootstrap
	// data carries it, which "kubeadm init" uploads to kubeadm-config.
	ClusterYAML []byte
}

// readKubeadmConfig finds the kubeadm configuration in the bootstrap files.
func readKubeadmConfig(files []bootstrapFile) (*kubeadmConfig, error) {
	for _, f := range files {
		switch f.Path {
		case initConfigPath, joinConfigPath:
			return parseKubeadmConfig(f.Content)
		}
	}
	return nil, fmt.Errorf("the bootstrap data writes neither %s nor %s: not a kubeadm machine", initConfigPath, joinConfigPath)
}

func parseKubeadmConfig(data []byte) (*kubeadmConfig, error) {
	out := &kubeadmConfig{}
	for _, doc := range splitYAML(data) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("reading the kubeadm configuration: %w", err)
		}
		if head.Kind == "" {
			continue
		}
		if head.APIVersion != kubeadmAPIVersion {
			return nil, fmt.Errorf("kubeadm configuration %s is %s: only %s is read (Kubernetes 1.31 and later)", head.Kind, head.APIVersion, kubeadmAPIVersion)
		}
		var err error
		switch head.Kind {
		case "ClusterConfiguration":
			out.Cluster, err = parseClusterConfiguration(doc)
			out.ClusterYAML = doc
		case "InitConfiguration":
			out.Init = &initConfiguration{}
			err = yaml.Unmarshal(doc, out.Init)
		case "JoinConfiguration":
			out.Join = &joinConfiguration{}
			err = yaml.Unmarshal(doc, out.Join)
		}
		if err != nil {
			return nil, fmt.Errorf("reading kubeadm %s: %w", head.Kind, err)
		}
	}
	switch {
	case out.Init != nil && out.Cluster == nil:
		return nil, errors.New("the kubeadm init configuration has no ClusterConfiguration")
	case out.Init == nil && out.Join == nil:
		return nil, errors.New("the kubeadm configuration has neither an InitConfiguration nor a JoinConfiguration")
	case out.Join != nil && out.Join.Discovery.BootstrapToken == nil:
		return nil, errors.New("the kubeadm JoinConfiguration has no bootstrap token to discover the cluster with")
	}
	return out, nil
}

func parseClusterConfiguration(doc []byte) (*clusterConfiguration, error) {
	c := &clusterConfiguration{}
	if err := yaml.Unmarshal(doc, c); err != nil {
		return nil, err
	}
	if c.Kind != "ClusterConfiguration" {
		return nil, fmt.Errorf("kind %q is not ClusterConfiguration", c.Kind)
	}
	if c.Etcd.External == nil || len(c.Etcd.External.Endpoints) == 0 {
		return nil, errors.New("the ClusterConfiguration has no external etcd: a local cluster's etcd is the LocalCluster's, set etcd.external in the KubeadmControlPlane")
	}
	return c, nil
}

// splitYAML splits a multi-document YAML stream.
func splitYAML(data []byte) [][]byte {
	var out [][]byte
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		doc = bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---"))
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
	return out
}

// nodeTaints are the taints of the machine's Node: those of
// nodeRegistration, or kubeadm's control-plane taint when it gives none.
func (n nodeRegistration) nodeTaints() []corev1.Taint {
	if n.Taints != nil {
		return *n.Taints
	}
	return []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
}

// kubelet flags of kubeletExtraArgs a local machine acts on: bex-node
// takes them on a worker; a control-plane machine's Node gets the labels.
const (
	kubeletNodeLabels = "node-labels"
	kubeletTaints     = "register-with-taints"
)

// nodeLabels are the labels kubeletExtraArgs' node-labels give the Node
// (comma-separated KEY=VALUE; repeated flags add up, as the kubelet's do).
func (n nodeRegistration) nodeLabels() (map[string]string, error) {
	out := map[string]string{}
	for _, a := range n.KubeletExtraArgs {
		if a.Name != kubeletNodeLabels {
			continue
		}
		for _, kv := range strings.Split(a.Value, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("kubeletExtraArgs node-labels %q: %q is not KEY=VALUE", a.Value, kv)
			}
			out[k] = v
		}
	}
	return out, nil
}

// workerKubeletArgs are the node agent's flags of a worker's
// nodeRegistration, as "kubeadm join" writes a worker kubelet's
// (kubeadm-flags.env): its taints as --register-with-taints (a worker's
// kubelet registers with them; kubeadm taints a control-plane node in
// its mark-control-plane phase instead), then kubeletExtraArgs'
// node-labels and register-with-taints, which override kubeadm's. The
// node agent checks them as the kubelet does.
func (n nodeRegistration) workerKubeletArgs() []string {
	var out []string
	if n.Taints != nil && len(*n.Taints) > 0 && !slices.ContainsFunc(n.KubeletExtraArgs, func(a arg) bool { return a.Name == kubeletTaints }) {
		ts := make([]string, len(*n.Taints))
		for i, t := range *n.Taints {
			ts[i] = t.Key + ":" + string(t.Effect)
			if t.Value != "" {
				ts[i] = t.Key + "=" + t.Value + ":" + string(t.Effect)
			}
		}
		out = append(out, "--"+kubeletTaints+"="+strings.Join(ts, ","))
	}
	for _, a := range n.KubeletExtraArgs {
		if a.Name == kubeletNodeLabels || a.Name == kubeletTaints {
			out = append(out, "--"+a.Name+"="+a.Value)
		}
	}
	return out
}

// pathFlagSuffixes are the endings of the control-plane components' flag
// names whose value is a path on the node ("kubeconfig" ends
// --authentication-kubeconfig too).
var pathFlagSuffixes = []string{"-file", "-cafile", "-certfile", "-keyfile", "-certificate", "-key", "-config", "-path", "-dir", "kubeconfig"}

// apiServerArgs returns kube-apiserver's flags as kubeadm's
// getAPIServerCommand makes them (its defaults, then extraArgs), with every
// path on the node moved under root, and the flags this machine needs in
// place of a host of its own (see docs/fleet.md).
func apiServerArgs(cc *clusterConfiguration, root, ip string, port int) []string {
	dir := cc.certDir()
	ext := cc.Etcd.External
	defaults := []arg{
		{"advertise-address", ip},
		{"enable-admission-plugins", "NodeRestriction"},
		{"service-cluster-ip-range", cc.serviceSubnet()},
		{"service-account-key-file", path.Join(dir, "sa.pub")},
		{"service-account-signing-key-file", path.Join(dir, "sa.key")},
		{"service-account-issuer", "https://kubernetes.default.svc." + cc.dnsDomain()},
		{"client-ca-file", path.Join(dir, "ca.crt")},
		{"tls-cert-file", path.Join(dir, "apiserver.crt")},
		{"tls-private-key-file", path.Join(dir, "apiserver.key")},
		{"kubelet-client-certificate", path.Join(dir, "apiserver-kubelet-client.crt")},
		{"kubelet-client-key", path.Join(dir, "apiserver-kubelet-client.key")},
		{"enable-bootstrap-token-auth", "true"},
		{"secure-port", strconv.Itoa(port)},
		{"allow-privileged", "true"},
		{"kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname"},
		{"requestheader-username-headers", "X-Remote-User"},
		{"requestheader-group-headers", "X-Remote-Group"},
		{"requestheader-extra-headers-prefix", "X-Remote-Extra-"},
		{"requestheader-client-ca-file", path.Join(dir, "front-proxy-ca.crt")},
		{"requestheader-allowed-names", "front-proxy-client"},
		{"proxy-client-cert-file", path.Join(dir, "front-proxy-client.crt")},
		{"proxy-client-key-file", path.Join(dir, "front-proxy-client.key")},
		{"etcd-servers", strings.Join(ext.Endpoints, ",")},
		{"etcd-cafile", ext.CAFile},
		{"etcd-certfile", ext.CertFile},
		{"etcd-keyfile", ext.KeyFile},
		{"authorization-mode", "Node,RBAC"},
		// Not kubeadm's: every machine of this machine listens on its own
		// loopback address, which the kubernetes Service's endpoints may not
		// hold, and it binds that address only.
		{"bind-address", ip},
		{"endpoint-reconciler-type", "none"},
	}
	merged := slices.DeleteFunc(mergeArgs(defaults, cc.APIServer.ExtraArgs), func(a arg) bool {
		return a.Value == "" && strings.HasPrefix(a.Name, "etcd-") && a.Name != "etcd-servers"
	})
	return commandArgs(merged, root)
}

// controllerManagerArgs returns kube-controller-manager's flags as
// kubeadm's getControllerManagerCommand makes them (its defaults, then
// controllerManager.extraArgs), with every path on the node moved under
// root. Its kubeconfig is the machine's controller-manager.conf, which
// names the machine's own kube-apiserver.
func controllerManagerArgs(cc *clusterConfiguration, root, ip string) []string {
	dir := cc.certDir()
	kubeconfig := path.Join(kubernetesDir, kubeControllerManager.kubeconfig)
	ca := path.Join(dir, "ca.crt")
	defaults := []arg{
		// Not kubeadm's 127.0.0.1: each machine has its own loopback
		// address, so that every machine's component listens on its
		// standard port.
		{"bind-address", ip},
		{"leader-elect", "true"},
		{"kubeconfig", kubeconfig},
		{"authentication-kubeconfig", kubeconfig},
		{"authorization-kubeconfig", kubeconfig},
		{"client-ca-file", ca},
		{"requestheader-client-ca-file", path.Join(dir, "front-proxy-ca.crt")},
		{"root-ca-file", ca},
		{"service-account-private-key-file", path.Join(dir, "sa.key")},
		{"cluster-signing-cert-file", ca},
		{"cluster-signing-key-file", path.Join(dir, "ca.key")},
		{"use-service-account-credentials", "true"},
		{"controllers", "*,bootstrapsigner,tokencleaner"},
	}
	// kubeadm lets the controller manager allocate the Nodes' Pod CIDRs,
	// and tells it the service range, only with a Pod subnet.
	if cc.Networking.PodSubnet != "" {
		defaults = append(defaults,
			arg{"allocate-node-cidrs", "true"},
			arg{"cluster-cidr", cc.Networking.PodSubnet},
			arg{"service-cluster-ip-range", cc.serviceSubnet()})
	}
	defaults = append(defaults, arg{"cluster-name", cc.clusterName()})
	return commandArgs(mergeArgs(defaults, cc.ControllerManager.ExtraArgs), root)
}

// schedulerArgs returns kube-scheduler's flags as kubeadm's
// getSchedulerCommand makes them (its defaults, then scheduler.extraArgs),
// with every path on the node moved under root.
func schedulerArgs(cc *clusterConfiguration, root, ip string) []string {
	kubeconfig := path.Join(kubernetesDir, kubeScheduler.kubeconfig)
	defaults := []arg{
		{"bind-address", ip}, // as the controller manager's
		{"leader-elect", "true"},
		{"kubeconfig", kubeconfig},
		{"authentication-kubeconfig", kubeconfig},
		{"authorization-kubeconfig", kubeconfig},
	}
	return commandArgs(mergeArgs(defaults, cc.Scheduler.ExtraArgs), root)
}

// mergeArgs applies extraArgs to a component's defaults: a flag they name
// takes the new value in its place, a new flag comes after the defaults.
func mergeArgs(defaults, extra []arg) []arg {
	merged := append([]arg(nil), defaults...)
	index := map[string]int{}
	for i, a := range merged {
		index[a.Name] = i
	}
	for _, a := range extra {
		if i, ok := index[a.Name]; ok {
			merged[i].Value = a.Value
			continue
		}
		index[a.Name] = len(merged)
		merged = append(merged, a)
	}
	return merged
}

// commandArgs returns args as a command line's flags, the absolute path
// each path flag names moved under root, the machine's "/".
func commandArgs(args []arg, root string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		v := a.Value
		if isPathFlag(a.Name) && path.IsAbs(v) {
			v = filepath.Join(root, filepath.FromSlash(v))
		}
		out = append(out, "--"+a.Name+"="+v)
	}
	return out
}

// flagValue returns the value of the last --name= in args.
func flagValue(args []string, name string) (string, bool) {
	value, found := "", false
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			value, found = v, true
		}
	}
	return value, found
}

func isPathFlag(name string) bool {
	if name == "config" { // kube-scheduler's --config
		return true
	}
	for _, s := range pathFlagSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// readKubeadmConfigMap reads kube-system/kubeadm-config as "kubeadm join"'s
// discovery does: with the join's bootstrap token, through the endpoint it
// names, trusting caPEM (the cluster CA). A refused token fails here.
func (j *joinConfiguration) readKubeadmConfigMap(ctx context.Context, caPEM []byte) (*corev1.ConfigMap, error) {
	bt := j.Discovery.BootstrapToken
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://" + bt.APIServerEndpoint, BearerToken: bt.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading kube-system/kubeadm-config with the bootstrap token through %s: %w", bt.APIServerEndpoint, err)
	}
	return cm, nil
}
