package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	netutils "k8s.io/utils/net"

	"bex.co/bex/apis/scheduling/openapi"
	"bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/apiserver/frontproxy"
	"bex.co/bex/internal/fleetstate"
)

// DefaultEtcdPathPrefix is where bex-apiserver keeps its objects in etcd:
// beside the kube-apiserver's /registry, never inside it.
const DefaultEtcdPathPrefix = "/bex-scheduling"

// Options are bex-apiserver's command-line options.
type Options struct {
	// RecommendedOptions are the generic server's: etcd, serving,
	// delegated authentication and authorization, audit, admission.
	RecommendedOptions *genericoptions.RecommendedOptions

	// LocalClusters are static clusters in fleetstate.ParseStatic's form,
	// such as embedded mode's "local:cpu=4,memory=8Gi,pods=110,standby".
	LocalClusters []string
	// Scoring is binpack or spread.
	Scoring string
	// ClusterAPI reads Cluster API clusters from the management cluster (the
	// --kubeconfig's); off, the fleet is the local clusters only.
	ClusterAPI bool
	// FleetNamespace limits the Cluster API clusters read to one namespace.
	FleetNamespace string

	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	static []fleetstate.Cluster
}

// NewOptions returns the default options.
func NewOptions() *Options {
	scheme, codecs := NewScheme()
	ro := genericoptions.NewRecommendedOptions(DefaultEtcdPathPrefix, codecs.LegacyCodec(v1alpha1.SchemeGroupVersion))
	ro.Etcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(v1alpha1.SchemeGroupVersion, schema.GroupKind{Group: v1alpha1.GroupName})
	// The kube-apiserver in front already applies priority and fairness to
	// every request it proxies here.
	ro.Features.EnablePriorityAndFairness = false
	return &Options{
		RecommendedOptions: ro,
		Scoring:            "binpack",
		ClusterAPI:         true,
		scheme:             scheme,
		codecs:             codecs,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.RecommendedOptions.AddFlags(fs)
	fs.StringArrayVar(&o.LocalClusters, "local-cluster", o.LocalClusters,
		"a static cluster of the fleet, NAME:cpu=4,memory=8Gi,pods=110[,pool=default][,region=NAME][,plans=starter+standard][,version=1.37.2][,standby]; standby: it takes new placements only while no Cluster API cluster can run apps; repeatable")
	fs.StringVar(&o.Scoring, "scoring", o.Scoring, "how feasible pools are scored: binpack (fill the fullest first) or spread (the emptiest first)")
	fs.BoolVar(&o.ClusterAPI, "cluster-api", o.ClusterAPI, "read Cluster API clusters (v1beta2) from the cluster of --kubeconfig")
	fs.StringVar(&o.FleetNamespace, "fleet-namespace", o.FleetNamespace, "read Cluster API clusters of this namespace only (default: all)")
}

// Complete parses what the flags left as text.
func (o *Options) Complete() error {
	o.Scoring = strings.ToLower(o.Scoring)
	o.static = nil
	for _, s := range o.LocalClusters {
		c, err := fleetstate.ParseStatic(s)
		if err != nil {
			return fmt.Errorf("--local-cluster: %w", err)
		}
		o.static = append(o.static, c)
	}
	return nil
}

// Validate checks the options.
func (o *Options) Validate() error {
	errs := o.RecommendedOptions.Validate()
	if o.strategy() == "" {
		errs = append(errs, fmt.Errorf("--scoring %q: want binpack or spread", o.Scoring))
	}
	if !o.ClusterAPI && len(o.static) == 0 {
		errs = append(errs, errors.New("the fleet is empty: give --local-cluster or leave --cluster-api on"))
	}
	seen := map[string]bool{}
	for _, c := range o.static {
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("--local-cluster %s given twice", c.Name))
		}
		seen[c.Name] = true
	}
	return errors.Join(errs...)
}

func (o *Options) strategy() string {
	switch o.Scoring {
	case "binpack":
		return v1alpha1.StrategyBinPack
	case "spread":
		return v1alpha1.StrategySpread
	}
	return ""
}

// Config builds the server's configuration. Without --tls-cert-file it
// serves a self-signed certificate for localhost.
func (o *Options) Config() (*Config, error) {
	if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}
	sc := genericapiserver.NewRecommendedConfig(o.codecs)
	sc.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	namer := openapinamer.NewDefinitionNamer(o.scheme)
	sc.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	sc.OpenAPIConfig.Info.Title, sc.OpenAPIConfig.Info.Version = "bex scheduling", "v1alpha1"
	sc.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	sc.OpenAPIV3Config.Info.Title, sc.OpenAPIV3Config.Info.Version = "bex scheduling", "v1alpha1"
	if err := o.disableUnservedAdmissionPlugins(); err != nil {
		return nil, err
	}
	if err := o.RecommendedOptions.ApplyTo(sc); err != nil {
		return nil, fmt.Errorf("applying options: %w", err)
	}
	if err := cacheFrontProxyVerification(&sc.Authentication); err != nil {
		return nil, err
	}

	extra := ExtraConfig{Scheme: o.scheme, Codecs: o.codecs, Strategy: o.strategy()}
	fleet := fleetstate.Fleet{fleetstate.Static(o.static)}
	if o.ClusterAPI {
		if sc.ClientConfig == nil {
			return nil, errors.New("--cluster-api needs a kubeconfig of the management cluster (--kubeconfig or in-cluster)")
		}
		capi, err := fleetstate.NewCAPI(sc.ClientConfig, fleetstate.CAPIOptions{Namespace: o.FleetNamespace})
		if err != nil {
			return nil, fmt.Errorf("creating Cluster API source: %w", err)
		}
		fleet = append(fleet, capi)
		extra.Starters = append(extra.Starters, capi.Start)
	}
	extra.Fleet = fleet
	return &Config{GenericConfig: sc, ExtraConfig: extra}, nil
}

// cacheFrontProxyVerification puts a frontproxy.Authenticator in front of
// the delegating authenticator ApplyTo built: the aggregator's certificate
// is then verified once a minute, not on every request. Without a
// request-header config (no front proxy) it changes nothing.
func cacheFrontProxyVerification(authn *genericapiserver.AuthenticationInfo) error {
	if authn.RequestHeaderConfig == nil || authn.Authenticator == nil {
		return nil
	}
	auth, err := frontproxy.New(authn.RequestHeaderConfig, authn.Authenticator, frontproxy.Options{})
	if err != nil {
		return fmt.Errorf("caching front-proxy verification: %w", err)
	}
	authn.Authenticator = auth
	return nil
}

// Run builds the server and serves until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	srv, err := cfg.Complete().New()
	if err != nil {
		return err
	}
	return srv.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}
