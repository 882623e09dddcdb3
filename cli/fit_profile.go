package cli

import (
	"context"
	"fmt"
	"os"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/muster-io/muster/manifests"
	"github.com/muster-io/muster/plugins/gang/planfilter"
)

// fitProfileName is the profile fit judges with when the configuration has
// several: the one the shipped configuration defines.
const fitProfileName = "muster-scheduler"

// schedulerConfig is the KubeSchedulerConfiguration fit judges with: the
// file of --scheduler-config, else the one the manifests install.
func (o *FitOptions) schedulerConfig() ([]byte, string, error) {
	if o.SchedulerConfig == "" {
		return manifests.SchedulerConfig, "the shipped scheduler configuration", nil
	}
	data, err := os.ReadFile(o.SchedulerConfig)
	if err != nil {
		return nil, "", withCode(ExitUsage, fmt.Errorf("--scheduler-config: %w", err))
	}
	return data, o.SchedulerConfig, nil
}

// loadFitProfile picks the profile of a configuration: its only one, else
// muster-scheduler's.
func loadFitProfile(data []byte, source string) (*schedProfile, error) {
	prof, err := planfilter.LoadProfile(data, "")
	if err != nil {
		prof, err = planfilter.LoadProfile(data, fitProfileName)
	}
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("%s: %w", source, err))
	}
	return &schedProfile{profile: prof, source: source}, nil
}

// profile builds the scheduler profile's plugins over the snapshot, with
// the objects they read for these workloads' members listed from the
// cluster. It returns the checks it could not make, in words for the
// report.
func (s *fitSnapshot) profile(ctx context.Context, workloads []*fitWorkload) (*planfilter.Profile, []string, error) {
	var notEvaluated []string
	objs, unread := s.offlineObjects(ctx, workloads)
	notEvaluated = append(notEvaluated, unread...)
	prof, err := planfilter.NewProfile(ctx, s.sched.profile, planfilter.NewSnapshot(s.infos), objs)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.sched.source, err)
	}
	for _, l := range prof.LeftOut {
		// MusterGang's own judgement is the planner and the victim search,
		// which fit runs itself.
		if l != "MusterGang: not an in-tree plugin" {
			notEvaluated = append(notEvaluated, "plugin "+l)
		}
	}
	for _, w := range workloads {
		for _, g := range w.gangs {
			for _, p := range g.pending {
				if len(p.Spec.ResourceClaims) > 0 {
					notEvaluated = append(notEvaluated, fmt.Sprintf("resource claims of gang %s (DRA devices are not read): the DynamicResources plugin refuses its members here", g.key))
					break
				}
			}
		}
	}
	return prof, notEvaluated, nil
}

// schedProfile is the profile fit judges with and where it comes from.
type schedProfile struct {
	profile *schedconfig.KubeSchedulerProfile
	source  string
}

// offlineObjects lists what the profile's plugins read besides nodes and
// pods, and only when a member needs it: namespaces for affinity terms with
// a namespace selector, claims, volumes, classes and CSI nodes for members
// with persistent volume claims. What cannot be listed is named.
func (s *fitSnapshot) offlineObjects(ctx context.Context, workloads []*fitWorkload) (planfilter.Objects, []string) {
	var objs planfilter.Objects
	var unread []string
	var pending []*corev1.Pod
	for _, w := range workloads {
		for _, g := range w.gangs {
			pending = append(pending, g.pending...)
		}
	}
	kube := s.cluster.Kube
	if s.anyPod(pending, usesNamespaceSelector) {
		list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			unread = append(unread, "namespace selectors of pod affinity terms: "+oneLine(apiError("list namespaces", err).Error()))
		} else {
			for i := range list.Items {
				objs.Namespaces = append(objs.Namespaces, &list.Items[i])
			}
		}
	}
	namespaces := map[string]bool{}
	for _, p := range pending {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
				namespaces[p.Namespace] = true
			}
		}
	}
	if len(namespaces) == 0 {
		return objs, unread
	}
	if err := s.listVolumes(ctx, namespaces, &objs); err != nil {
		unread = append(unread, "volumes of the members: "+oneLine(err.Error()))
	}
	return objs, unread
}

func (s *fitSnapshot) listVolumes(ctx context.Context, namespaces map[string]bool, objs *planfilter.Objects) error {
	kube := s.cluster.Kube
	var nss []string
	for ns := range namespaces {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		list, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return apiError("list persistentvolumeclaims", err)
		}
		for i := range list.Items {
			objs.PersistentVolumeClaims = append(objs.PersistentVolumeClaims, &list.Items[i])
		}
	}
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return apiError("list persistentvolumes", err)
	}
	for i := range pvs.Items {
		objs.PersistentVolumes = append(objs.PersistentVolumes, &pvs.Items[i])
	}
	scs, err := kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return apiError("list storageclasses", err)
	}
	objs.StorageClasses = ptrs(scs.Items)
	csis, err := kube.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return apiError("list csinodes", err)
	}
	objs.CSINodes = ptrs(csis.Items)
	return nil
}

func ptrs[T storagev1.StorageClass | storagev1.CSINode](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// anyPod reports whether f holds for a pending member or a bound pod.
func (s *fitSnapshot) anyPod(pending []*corev1.Pod, f func(*corev1.Pod) bool) bool {
	for _, p := range pending {
		if f(p) {
			return true
		}
	}
	for _, ni := range s.infos {
		for _, pi := range ni.GetPodsWithAffinity() {
			if f(pi.GetPod()) {
				return true
			}
		}
	}
	return false
}

// usesNamespaceSelector: some pod (anti-)affinity term of p selects
// namespaces by label, which the plugin resolves with the namespaces'
// labels.
func usesNamespaceSelector(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}
