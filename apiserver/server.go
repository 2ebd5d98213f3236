package apiserver

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/install"
	"bex.co/bex/apiserver/registry/clustercapacity"
	"bex.co/bex/apiserver/registry/placement"
	"bex.co/bex/apiserver/registry/placementreview"
	"bex.co/bex/apiserver/scheduler"
	"bex.co/bex/internal/fleetstate"
)

// NewScheme returns a scheme with the scheduling.bex.co group and the
// meta types a generic server needs, and its codec factory.
func NewScheme() (*runtime.Scheme, serializer.CodecFactory) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	// The generic server encodes options and status in the empty group.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	return scheme, serializer.NewCodecFactory(scheme)
}

// ExtraConfig is what bex-apiserver adds to the generic server's config.
type ExtraConfig struct {
	// Scheme and Codecs of the server (NewScheme).
	Scheme *runtime.Scheme
	Codecs serializer.CodecFactory
	// Fleet is the fleet the scheduler places onto.
	Fleet fleetstate.Source
	// Starters run in a post-start hook before the fleet is read, each
	// returning once its caches synced (the Cluster API source's Start).
	Starters []func(context.Context) error
	// Strategy scores candidates: v1alpha1.StrategyBinPack or StrategySpread.
	Strategy string
}

// Config is the whole configuration of bex-apiserver.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

// CompletedConfig is a Config with its defaults filled in; only Complete
// makes one.
type CompletedConfig struct {
	generic genericapiserver.CompletedConfig
	extra   *ExtraConfig
}

// Complete fills in the generic server's defaults.
func (c *Config) Complete() CompletedConfig {
	return CompletedConfig{generic: c.GenericConfig.Complete(), extra: &c.ExtraConfig}
}

// Server is a bex-apiserver ready to run.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// New builds the server and installs the scheduling.bex.co/v1alpha1
// resources.
func (c CompletedConfig) New() (*Server, error) {
	if c.extra.Fleet == nil || c.extra.Scheme == nil {
		return nil, errors.New("bex-apiserver: config has no fleet or scheme")
	}
	gs, err := c.generic.New("bex-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("creating generic server: %w", err)
	}
	placements, err := placement.NewREST(c.extra.Scheme, c.generic.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	// The reviews the App controller records hold their pool's room until
	// this server's index sees the Placement written: concurrent reviews
	// do not over-commit the fullest pool. Each replica holds its own.
	reservations, err := scheduler.NewReservations(scheduler.ReservationTTL)
	if err != nil {
		return nil, err
	}
	index, err := placement.NewIndex(placements, reservations)
	if err != nil {
		return nil, err
	}
	view, err := scheduler.NewView(c.extra.Fleet, index, reservations, c.extra.Strategy)
	if err != nil {
		return nil, err
	}
	capacities, err := clustercapacity.NewREST(view)
	if err != nil {
		return nil, err
	}
	reviews, err := placementreview.NewREST(view)
	if err != nil {
		return nil, err
	}

	group := genericapiserver.NewDefaultAPIGroupInfo(scheduling.GroupName, c.extra.Scheme, metav1.ParameterCodec, c.extra.Codecs)
	group.VersionedResourcesStorageMap["v1alpha1"] = map[string]rest.Storage{
		"placements":        placements,
		"clustercapacities": capacities,
		"placementreviews":  reviews,
	}
	if err := gs.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("installing scheduling.bex.co: %w", err)
	}

	starters := c.extra.Starters
	gs.AddPostStartHookOrDie("bex-scheduling-caches", func(hc genericapiserver.PostStartHookContext) error {
		ctx := hc.Context
		go index.Run(ctx)
		for _, start := range starters {
			if err := start(ctx); err != nil {
				return fmt.Errorf("starting fleet source: %w", err)
			}
		}
		if !index.WaitForSync(ctx) {
			return errors.New("placements index did not sync")
		}
		go capacities.Run(ctx)
		klog.FromContext(ctx).Info("Scheduling caches synced")
		return nil
	})
	return &Server{GenericAPIServer: gs}, nil
}
