package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/web/api/apiclient"
)

// A cordon, for operators: the annotation scheduling.bex.co/cordoned=true
// on a Cluster API Cluster of the fleet, of any provider. The scheduler
// places no app on a cordoned cluster, and the App controller places the
// apps it runs again; the runtime moves each (it starts on its new cluster
// and passes its health check there, the edge switches, then it stops on
// the old one). The API writes the annotation alone, with a merge patch,
// so that it never undoes what Cluster API or a fleet upgrade writes to
// the Cluster meanwhile.

// What a cordon and an uncordon say happens now.
const (
	cordonedMessage = "cordoned: the scheduler places no new app on it, and the App controller places the apps it runs on other clusters; " +
		"each starts there and passes its health check before the edge switches to it and it stops here. " +
		"An app no other cluster can take stays and keeps serving. bex fleet uncordon %s takes placements again"
	uncordonedMessage = "uncordoned: the scheduler places apps on it again; the apps moved off it stay where they are"
)

func (s *Server) cordonCluster(c echo.Context) error   { return s.setCordon(c, true) }
func (s *Server) uncordonCluster(c echo.Context) error { return s.setCordon(c, false) }

// setCordon sets or removes the cordon annotation of the Cluster the path
// names, and audits the change, if any; the answer says whether the
// Cluster was so already.
func (s *Server) setCordon(c echo.Context, cordon bool) error {
	ctx := c.Request().Context()
	key := types.NamespacedName{Namespace: c.Param("namespace"), Name: c.Param("name")}
	full := key.String()
	cl := &clusterv1.Cluster{}
	if err := s.kube.Get(ctx, key, cl); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return notFound("no cluster %s: bex fleet list shows the clusters", full)
		}
		return fmt.Errorf("reading cluster %s: %w", full, err)
	}
	was := isCordoned(cl)
	// null removes the key; a patch that changes nothing writes nothing.
	var value any
	if cordon {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{schedulingv1alpha1.CordonedAnnotation: value}}})
	if err != nil {
		return fmt.Errorf("encoding the cordon patch: %w", err)
	}
	if err := s.kube.Patch(ctx, cl, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return notFound("no cluster %s: bex fleet list shows the clusters", full)
		}
		return fmt.Errorf("patching cluster %s's cordon: %w", full, err)
	}
	action, message := "fleet.uncordon", uncordonedMessage
	if cordon {
		action, message = "fleet.cordon", fmt.Sprintf(cordonedMessage, full)
	}
	changed := was != isCordoned(cl)
	if changed {
		s.audit(c, action, full, nil)
	}
	return c.JSON(http.StatusOK, apiclient.ClusterCordon{Name: full, Cordoned: isCordoned(cl), Changed: changed, Message: message})
}

// isCordoned says whether the scheduler takes cl as cordoned.
func isCordoned(cl *clusterv1.Cluster) bool {
	return cl.Annotations[schedulingv1alpha1.CordonedAnnotation] == "true"
}
