package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitaccess"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/builder/pipeline"
	"bex.co/bex/builder/release"
	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/httpserve"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/secretfile"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
	"bex.co/bex/web/dashboard"
)

// devTenant is the tenant make run creates for its user.
const devTenant = "dev"

// edgeAddresses are where the embedded edge listens, the addresses a
// Route's hostname must resolve to.
var edgeAddresses = []string{"127.0.0.1"}

// appDomain is where apps answer in embedded mode: <app>-<tenant>.localhost
// resolves to the loopback address without any DNS set-up.
const appDomain = "localhost"

// services are the platform's own servers in embedded mode.
type services struct {
	pipeline *pipeline.Pipeline
	// table is the edge's routing table; Routes are fed into it once the
	// controller manager's cache runs.
	table *edge.Table
	// certs is the edge's view of certificate state, for the Route
	// controller.
	certs *edge.Certificates
	// metrics holds the edge's per-route metrics.
	metrics *prometheus.Registry
	env     []envVar
	summary [][2]string
}

// startServices starts the registry, builder, runtime, edge, git receiver
// and API, each on a port remembered in <state>/ports.json, and registers
// their shutdown in stops. The builder talks to the buildkitd bk names.
func (o *Options) startServices(ctx context.Context, kube client.Client, st *store.Store, binDir string, bk build.Options, ready *atomic.Bool, log logr.Logger, stops *[]func()) (*services, error) {
	ports, err := loadPorts(filepath.Join(o.StateDir, "ports.json"))
	if err != nil {
		return nil, err
	}
	listen := func(name string) (net.Listener, error) {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Ports[name])))
		if err != nil && ports.Ports[name] != 0 {
			return nil, fmt.Errorf("listening for %s on port %d, used last time (free it or delete %s): %w", name, ports.Ports[name], ports.path, err)
		}
		if err != nil {
			return nil, fmt.Errorf("listening for %s: %w", name, err)
		}
		ports.Ports[name] = l.Addr().(*net.TCPAddr).Port
		return l, ports.save()
	}
	serve := func(name string, l net.Listener, srv *http.Server) {
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(err, "Server stopped", "server", name)
			}
		}()
		*stops = append(*stops, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		})
	}

	// Registry: every request presents its token, which only the builder
	// and the pipeline's Unpack get.
	regTokenFile := filepath.Join(o.StateDir, "registry-token")
	regToken, _, err := secretfile.LoadOrCreate(regTokenFile)
	if err != nil {
		return nil, fmt.Errorf("the registry's token: %w", err)
	}
	reg, err := registry.New(filepath.Join(o.StateDir, "registry"), regToken)
	if err != nil {
		return nil, fmt.Errorf("opening the registry: %w", err)
	}
	regL, err := listen("registry")
	if err != nil {
		return nil, err
	}
	// Blobs stream both ways for as long as they take: headers and idle
	// connections only are bounded.
	serve("registry", regL, httpserve.Timeouts{ReadHeader: 10 * time.Second, Idle: 120 * time.Second}.Server(reg.Handler()))

	// Builder, runtime, pipeline.
	sb, err := o.sandboxes(binDir)
	if err != nil {
		return nil, err
	}
	*stops = append(*stops, sb.close)
	builder, err := build.New(build.Options{
		WorkRoot: filepath.Join(o.StateDir, "builds"), Registry: regL.Addr().String(), RegistryAuth: registry.Auth(regToken),
		Log:          log.WithName("builder"),
		BuildKitAddr: bk.BuildKitAddr, BuildCtl: bk.BuildCtl, NoBuildKitReason: bk.NoBuildKitReason, BuildKitLimits: bk.BuildKitLimits,
		Sandbox: sb.builds, SandboxPATH: sb.buildPATH, SandboxLimits: sandbox.Limits{CPUMilli: o.buildCPUMilli},
		WorkDiskSize: o.buildDisk, CacheDiskSize: o.buildCacheDisk, MaxCheckoutBytes: o.MaxCheckoutBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the builder: %w", err)
	}
	// Before the sandboxes close: the builds' disks are unmounted.
	*stops = append(*stops, func() {
		if err := builder.Close(); err != nil {
			log.Error(err, "Unmounting the builds' disks")
		}
	})
	rt := process.New(process.Options{LogDir: filepath.Join(o.StateDir, "logs", "apps"), Sandbox: sb.apps})
	*stops = append(*stops, func() { _ = rt.Close() })
	if sb.apps != nil {
		log.Info("Tenant sandboxes ready", "apps", sb.apps.Subnet().String(), "builds", sb.builds.Subnet().String())
	}

	edgeL, err := listen("edge")
	if err != nil {
		return nil, err
	}
	edgeTLSL, err := listen("edge-https")
	if err != nil {
		return nil, err
	}
	edgePort, edgeTLSPort := edgeL.Addr().(*net.TCPAddr).Port, edgeTLSL.Addr().(*net.TCPAddr).Port
	urlOf := func(tenant, app string) string {
		return fmt.Sprintf("https://%s:%d", edge.Hostname(tenant, app, appDomain), edgeTLSPort)
	}
	rel, err := release.New(release.Options{
		Store: st, Kube: kube, Runtime: rt, Keychain: builder.Keychain(),
		ReleasesDir: filepath.Join(o.StateDir, "releases"), BinDir: binDir, URL: urlOf, Log: log.WithName("releaser"),
		ReleaseRetention: o.ReleaseRetention,
	})
	if err != nil {
		return nil, err
	}
	pl, err := pipeline.New(pipeline.Options{Releaser: rel, Builder: builder, Quotas: o.quotas(), Log: log.WithName("pipeline")})
	if err != nil {
		return nil, err
	}
	ca, err := edge.LoadOrCreateLocalCA(filepath.Join(o.StateDir, "ca"))
	if err != nil {
		return nil, err
	}
	certs, err := certstore.New(st.Pool(), certstore.Options{})
	if err != nil {
		return nil, err
	}
	table := &edge.Table{Defaults: &edge.DefaultHosts{Domain: appDomain, Apps: rt}}
	metrics := prometheus.NewRegistry()
	edgeSrv, err := edge.NewServer(edge.ServerOptions{
		Table: table, Storage: certs, LocalCA: ca, HTTPPort: edgePort, HTTPSPort: edgeTLSPort,
		ListenHost: "127.0.0.1", Metrics: metrics, Log: log.WithName("edge"), CertificateBudget: o.CertificateBudget,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the edge: %w", err)
	}
	edgeCtx, stopEdge := context.WithCancel(context.WithoutCancel(ctx))
	edgeDone := make(chan struct{})
	go func() {
		defer close(edgeDone)
		if err := edgeSrv.Serve(edgeCtx, edgeL, edgeTLSL); err != nil {
			log.Error(err, "Edge stopped")
		}
	}()
	*stops = append(*stops, func() { stopEdge(); <-edgeDone; edgeSrv.Close() })

	// Git receiver.
	git, err := gitserver.New(gitserver.Options{
		Root: filepath.Join(o.StateDir, "git"), Auth: gitaccess.Auth{Store: st}, Repos: gitaccess.Repos{Kube: kube},
		Deployer: pl, MaxPushBytes: o.MaxPushBytes, Log: log.WithName("git"),
		Quota: quota.RepoQuota{Defaults: o.quotas(), Store: st},
	})
	if err != nil {
		return nil, err
	}
	gitL, err := listen("git-http")
	if err != nil {
		return nil, err
	}
	gitSrv := gitserver.HTTPTimeouts().Server(git.HTTPHandler())
	go func() { _ = gitSrv.Serve(gitL) }()
	*stops = append(*stops, func() { _ = gitSrv.Close() })
	sshL, err := listen("git-ssh")
	if err != nil {
		return nil, err
	}
	hostKey, err := gitserver.LoadOrCreateHostKey(filepath.Join(o.StateDir, "ssh_host_ed25519_key"))
	if err != nil {
		return nil, err
	}
	sshCtx, cancelSSH := context.WithCancel(ctx)
	go func() { _ = git.ServeSSH(sshCtx, sshL, hostKey) }()
	*stops = append(*stops, func() { cancelSSH(); sshL.Close() })

	// API.
	gitBase := "http://" + gitL.Addr().String()
	apiSrv, err := api.New(api.Options{
		Store: st, Kube: kube, Deployer: pl, Logs: api.RuntimeLogs{Driver: rt},
		GitBase: gitBase, AppDomain: fmt.Sprintf("%s:%d", appDomain, edgeTLSPort), EdgeAddresses: edgeAddresses,
		Log: log.WithName("api"), MaxLogStreamsPerTenant: o.MaxLogStreamsPerTenant, Quotas: o.quotas(),
		ReservedHostnames: o.ReservedHostnames,
		ReadinessChecks: []func(context.Context) error{
			func(context.Context) error {
				if !ready.Load() {
					return errors.New("the platform is starting")
				}
				return nil
			},
			func(ctx context.Context) error {
				var nss corev1.NamespaceList
				if err := kube.List(ctx, &nss, client.Limit(1)); err != nil {
					return fmt.Errorf("kube-apiserver: %w", err)
				}
				return nil
			},
		},
	})
	if err != nil {
		return nil, err
	}
	apiL, err := listen("api")
	if err != nil {
		return nil, err
	}
	apiURL := "http://" + apiL.Addr().String()
	cookieKey, err := loadCookieKey(filepath.Join(o.StateDir, "dashboard-cookie-key"))
	if err != nil {
		return nil, err
	}
	traffic := edge.NewTrafficRecorder(metrics, 360)
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	go traffic.Run(trafficCtx, 10*time.Second)
	*stops = append(*stops, stopTraffic)
	dash, err := dashboard.New(dashboard.Options{
		API: apiURL, CookieKey: cookieKey, Traffic: edgeTraffic{traffic}, Log: log.WithName("dashboard"),
	})
	if err != nil {
		return nil, err
	}
	serve("api", apiL, api.ServerTimeouts().Server(dash.WithAPI(apiSrv.Handler())))

	devToken, err := o.ensureTenant(ctx, kube, st, devTenant, filepath.Join(o.StateDir, "dev-token"), false)
	if err != nil {
		return nil, err
	}
	opToken, err := o.ensureTenant(ctx, kube, st, "", filepath.Join(o.StateDir, "operator-token"), true)
	if err != nil {
		return nil, err
	}
	httpURL := fmt.Sprintf("http://127.0.0.1:%d", edgePort)
	httpsURL := fmt.Sprintf("https://127.0.0.1:%d", edgeTLSPort)
	sshURL := "ssh://git@" + sshL.Addr().String()
	return &services{
		pipeline: pl, table: table, certs: edgeSrv.Certificates(), metrics: metrics,
		env: []envVar{
			{"BEX_API", apiURL}, {"BEX_DASHBOARD", apiURL + "/"}, {"BEX_GIT", gitBase}, {"BEX_GIT_SSH", sshURL}, {"BEX_TOKEN", devToken},
			{"BEX_OPERATOR_TOKEN", opToken}, {"BEX_HTTP", httpURL}, {"BEX_HTTPS", httpsURL}, {"BEX_CA", ca.CertFile()},
			{"BEX_DOMAIN", fmt.Sprintf("%s:%d", appDomain, edgeTLSPort)},
		},
		summary: [][2]string{
			{"dashboard", apiURL + "/ (sign in with BEX_TOKEN, or BEX_OPERATOR_TOKEN for the console)"}, {"API", apiURL + api.Prefix}, {"git (HTTP)", gitBase + "/<tenant>/<app>.git"}, {"git (SSH)", sshURL + "/<tenant>/<app>.git"},
			{"edge (HTTPS)", fmt.Sprintf("https://<app>-<tenant>.%s:%d", appDomain, edgeTLSPort)},
			{"edge (HTTP)", fmt.Sprintf("http://<app>-<tenant>.%s:%d (redirects to HTTPS)", appDomain, edgePort)},
			{"local CA", ca.CertFile() + " (curl --cacert)"}, {"registry", regL.Addr().String() + " (user " + registry.Username + ", token in " + regTokenFile + ")"},
			{"sandboxes", sb.describe()},
		},
	}, nil
}

// loadCookieKey reads the dashboard's cookie key, creating it once.
func loadCookieKey(path string) ([]byte, error) {
	if data, err := os.ReadFile(path); err == nil && len(data) == 32 {
		return data, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("writing the dashboard's cookie key: %w", err)
	}
	return key, nil
}

// ensureTenant makes sure a tenant (or, with operator, an operator user)
// exists and that the token kept in tokenFile is valid, creating both when
// not, and returns the token.
func (o *Options) ensureTenant(ctx context.Context, kube client.Client, st *store.Store, name, tokenFile string, operator bool) (string, error) {
	if data, err := os.ReadFile(tokenFile); err == nil {
		secret := strings.TrimSpace(string(data))
		if _, err := st.AuthenticateToken(ctx, secret); err == nil {
			return secret, nil
		}
	}
	var tenantID, userID string
	if operator {
		u, err := st.CreateUser(ctx, store.NewUser{Email: "operator@" + appDomain, Role: store.RoleOperator})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return "", fmt.Errorf("creating the operator: %w", err)
		}
		if err != nil {
			return "", fmt.Errorf("the operator exists but %s is missing or refused: delete the state directory to start over: %w", tokenFile, err)
		}
		userID = u.ID
	} else {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.TenantLabel: name}}}
		if err := kube.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating namespace %s: %w", name, err)
		}
		t, err := st.GetTenantByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			t, err = st.CreateTenant(ctx, name)
		}
		if err != nil {
			return "", fmt.Errorf("creating tenant %s: %w", name, err)
		}
		tenantID = t.ID
	}
	secret, _, err := st.CreateToken(ctx, tenantID, userID, "make-run")
	if err != nil {
		return "", fmt.Errorf("creating a token: %w", err)
	}
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		return "", err
	}
	return secret, nil
}

// ports remembers which port each service listened on, so that URLs in
// .bex/env and image references in the registry stay valid across runs.
type ports struct {
	path  string
	Ports map[string]int `json:"ports"`
}

func loadPorts(path string) (*ports, error) {
	p := &ports{path: path, Ports: map[string]int{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if p.Ports == nil {
		p.Ports = map[string]int{}
	}
	return p, nil
}

func (p *ports) save() error {
	data, _ := json.MarshalIndent(p, "", "  ")
	return os.WriteFile(p.path, data, 0o644)
}

var _ io.Closer = (*process.Driver)(nil)
