package kube

import (
	"cmp"
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
)

// readAppsPage is how many objects one page of ReadApps' lists holds: the
// apiserver answers a page at a time, and the driver keeps only what Status
// and Usage read of each object.
const readAppsPage = 500

var _ runtime.AppsReader = (*Driver)(nil)

// appInNamespace is an app by the namespace its objects are in.
type appInNamespace struct{ namespace, app string }

// ReadApps implements runtime.AppsReader: it lists the Deployments and the
// Pods the driver made in every namespace, a page at a time, keeps those of
// apps, and makes of each app's what Status and Usage make of them; each
// node that runs a Pod is read once (its stats summary, kept
// Options.SummaryMaxAge as for Usage). An app without Deployments is
// ErrNotFound, as for Status. The driver's identity needs list of
// Deployments and Pods in every namespace; without it ReadApps fails, and
// the caller reads app by app.
func (d *Driver) ReadApps(ctx context.Context, apps []runtime.AppName) (map[runtime.AppName]runtime.AppReading, error) {
	wanted := make(map[appInNamespace]runtime.AppName, len(apps))
	for _, a := range apps {
		wanted[appInNamespace{d.opts.Namespace(a.Tenant), a.App}] = a
	}
	deps := map[appInNamespace][]appsv1.Deployment{}
	pods := map[appInNamespace][]corev1.Pod{}
	sel := []client.ListOption{client.HasLabels{LabelApp}, client.MatchingLabels{LabelManagedBy: managedBy}, client.Limit(readAppsPage)}
	for cont := ""; ; {
		var list appsv1.DeploymentList
		if err := d.c.List(ctx, &list, append(sel, client.Continue(cont))...); err != nil {
			return nil, fmt.Errorf("listing deployments: %w", err)
		}
		for _, dep := range list.Items {
			k := appInNamespace{dep.Namespace, dep.Labels[LabelApp]}
			if _, ok := wanted[k]; ok {
				dep.ManagedFields, dep.Spec.Template.Spec = nil, corev1.PodSpec{}
				deps[k] = append(deps[k], dep)
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	err := d.eachAppPod(ctx, func(k appInNamespace, pod corev1.Pod) {
		if _, ok := wanted[k]; ok {
			pods[k] = append(pods[k], pod)
		}
	})
	if err != nil {
		return nil, err
	}
	out := make(map[runtime.AppName]runtime.AppReading, len(wanted))
	for k, a := range wanted {
		var r runtime.AppReading
		notFound := fmt.Errorf("%s/%s: %w", a.Tenant, a.App, runtime.ErrNotFound)
		insts := instancesFrom(pods[k]) // sorts pods[k] the same way
		if len(deps[k]) == 0 {
			r.StatusErr = notFound
		} else {
			r.Status = statusFrom(deps[k])
			r.Status.Instances = insts
		}
		if len(pods[k]) == 0 {
			r.UsageErr = notFound
		} else {
			r.Usage, r.UsageErr = d.usageFrom(ctx, k.namespace, pods[k], insts)
		}
		out[a] = r
	}
	return out, nil
}

var _ runtime.InstancesReader = (*Driver)(nil)

// MetricsSources is d alone as runtimemetrics.Options.Sources: the
// runtime's metrics of the apps of d's cluster.
func (d *Driver) MetricsSources() map[string]runtime.InstancesReader {
	return map[string]runtime.InstancesReader{"": d}
}

// ReadInstances implements runtime.InstancesReader: it lists the Pods the
// driver made for apps in every namespace, a page at a time (the list
// ReadApps makes), and makes of each app's what Status makes of them:
// one instance per Pod, its ID the Pod's name, its restarts its
// containers' restart counts. One-off runs' and builds' Pods are not
// instances. The driver's identity needs list of Pods in every namespace.
func (d *Driver) ReadInstances(ctx context.Context) ([]runtime.AppInstance, error) {
	pods := map[appInNamespace][]corev1.Pod{}
	tenants := map[appInNamespace]string{}
	err := d.eachAppPod(ctx, func(k appInNamespace, pod corev1.Pod) {
		if _, ok := tenants[k]; !ok {
			tenants[k] = cmp.Or(pod.Labels[LabelTenant], pod.Namespace)
		}
		pods[k] = append(pods[k], pod)
	})
	if err != nil {
		return nil, err
	}
	var out []runtime.AppInstance
	for k, ps := range pods {
		name := runtime.AppName{Tenant: tenants[k], App: k.app}
		for _, inst := range instancesFrom(ps) {
			out = append(out, runtime.AppInstance{App: name, Instance: inst})
		}
	}
	return out, nil
}

// eachAppPod lists the Pods the driver made for apps in every namespace,
// a page at a time, and calls f with each, by its app, kept with only
// what Status and Usage read of it.
func (d *Driver) eachAppPod(ctx context.Context, f func(appInNamespace, corev1.Pod)) error {
	sel := []client.ListOption{client.HasLabels{LabelApp}, client.MatchingLabels{LabelManagedBy: managedBy}, client.Limit(readAppsPage)}
	for cont := ""; ; {
		var list corev1.PodList
		if err := d.c.List(ctx, &list, append(sel, client.Continue(cont))...); err != nil {
			return fmt.Errorf("listing pods: %w", err)
		}
		for _, pod := range list.Items {
			pod.ManagedFields, pod.Annotations = nil, nil
			pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName}
			f(appInNamespace{pod.Namespace, pod.Labels[LabelApp]}, pod)
		}
		if cont = list.Continue; cont == "" {
			return nil
		}
	}
}
