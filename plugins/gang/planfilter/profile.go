package planfilter

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// LoadProfile decodes a KubeSchedulerConfiguration, as kube-scheduler
// reads its --config (defaults applied), and returns its profile for
// schedulerName, or its only profile when schedulerName is "".
func LoadProfile(data []byte, schedulerName string) (*config.KubeSchedulerProfile, error) {
	obj, gvk, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("scheduler configuration: want a KubeSchedulerConfiguration, got %s", gvk)
	}
	var names []string
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		if p.SchedulerName == schedulerName || (schedulerName == "" && len(cfg.Profiles) == 1) {
			return p, nil
		}
		names = append(names, p.SchedulerName)
	}
	if schedulerName == "" {
		return nil, fmt.Errorf("scheduler configuration: %d profiles (%v); name one", len(names), names)
	}
	return nil, fmt.Errorf("scheduler configuration: no profile %q (has %v)", schedulerName, names)
}

// Objects are what the profile's plugins read through informers besides
// nodes and pods. A nil list was not read: the plugins see none of that
// kind, and Profile.Unread says which checks that leaves out.
type Objects struct {
	Namespaces             []*v1.Namespace
	PersistentVolumeClaims []*v1.PersistentVolumeClaim
	PersistentVolumes      []*v1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	CSINodes               []*storagev1.CSINode
}

// Profile is a scheduler profile's plugins built to judge pods on a
// Snapshot without a cluster: its informers are never started (nothing is
// read from a server), and only what Objects holds is in their stores.
type Profile struct {
	fw framework.Framework
	// SchedulerName is the profile's name.
	SchedulerName string
	// LeftOut are the plugins of the profile not run here, each with why,
	// sorted.
	LeftOut []string
}

// NewProfile builds prof's plugins with kube-scheduler's in-tree registry
// over snap and objs. Plugins the registry does not have (out of tree,
// MusterGang among them) are left out and named in LeftOut; the profile
// keeps a queue sort and a binder so that the framework accepts it (neither
// ever runs). The framework's background work ends with ctx.
func NewProfile(ctx context.Context, prof *config.KubeSchedulerProfile, snap *Snapshot, objs Objects) (*Profile, error) {
	// The framework records into the scheduler's metrics, which exist
	// once registered (once per process; a scheduler in the same process
	// registers the same ones).
	schedmetrics.Register()
	registry := frameworkplugins.NewInTreeRegistry()
	p := prof.DeepCopy()
	out := &Profile{SchedulerName: p.SchedulerName}
	left := map[string]bool{}
	if p.Plugins != nil {
		forEachPluginSet(p.Plugins, func(set *config.PluginSet) {
			set.Enabled = slices.DeleteFunc(set.Enabled, func(pl config.Plugin) bool {
				if _, ok := registry[pl.Name]; ok {
					return false
				}
				left[pl.Name] = true
				return true
			})
		})
		if len(p.Plugins.QueueSort.Enabled) == 0 {
			p.Plugins.QueueSort.Enabled = []config.Plugin{{Name: names.PrioritySort}}
		}
		if len(p.Plugins.Bind.Enabled) == 0 && !slices.ContainsFunc(p.Plugins.MultiPoint.Enabled, func(pl config.Plugin) bool { return pl.Name == names.DefaultBinder }) {
			p.Plugins.Bind.Enabled = []config.Plugin{{Name: names.DefaultBinder}}
		}
	}
	p.PluginConfig = slices.DeleteFunc(p.PluginConfig, func(pc config.PluginConfig) bool { return left[pc.Name] })
	for name := range left {
		out.LeftOut = append(out.LeftOut, name+": not an in-tree plugin")
	}
	sort.Strings(out.LeftOut)

	// A factory whose informers are never started: the plugins' listers
	// read the stores filled here. Its client is never called.
	factory := informers.NewSharedInformerFactory(nil, 0)
	if err := fill(factory, objs); err != nil {
		return nil, err
	}
	dra, err := draManager(ctx, factory)
	if err != nil {
		return nil, err
	}
	fw, err := frameworkruntime.NewFramework(ctx, registry, p,
		frameworkruntime.WithSnapshotSharedLister(snap),
		frameworkruntime.WithMutableSnapshotLister(snap),
		frameworkruntime.WithPodGroupManager(snap),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSharedDRAManager(dra),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())),
		frameworkruntime.WithParallelism(1),
	)
	if err != nil {
		return nil, fmt.Errorf("scheduler profile %s: %w", p.SchedulerName, err)
	}
	out.fw = fw
	return out, nil
}

// Runner is the profile's framework.
func (p *Profile) Runner() Runner { return p.fw }

// Filter returns a new Filter over the profile: one per plan.
func (p *Profile) Filter() *Filter { return New(p.fw, nil) }

// forEachPluginSet calls fn on every extension point's plugin set,
// multiPoint included, found by type so that a new extension point is
// never missed.
func forEachPluginSet(pl *config.Plugins, fn func(*config.PluginSet)) {
	v := reflect.ValueOf(pl).Elem()
	setType := reflect.TypeFor[config.PluginSet]()
	for i := range v.NumField() {
		if f := v.Field(i); f.Type() == setType {
			fn(f.Addr().Interface().(*config.PluginSet))
		}
	}
}

func fill(factory informers.SharedInformerFactory, objs Objects) error {
	adds := []struct {
		store cache.Store
		objs  []any
	}{
		{factory.Core().V1().Namespaces().Informer().GetStore(), anys(objs.Namespaces)},
		{factory.Core().V1().PersistentVolumeClaims().Informer().GetStore(), anys(objs.PersistentVolumeClaims)},
		{factory.Core().V1().PersistentVolumes().Informer().GetStore(), anys(objs.PersistentVolumes)},
		{factory.Storage().V1().StorageClasses().Informer().GetStore(), anys(objs.StorageClasses)},
		{factory.Storage().V1().CSINodes().Informer().GetStore(), anys(objs.CSINodes)},
	}
	for _, a := range adds {
		for _, o := range a.objs {
			if err := a.store.Add(o); err != nil {
				return fmt.Errorf("offline store: %w", err)
			}
		}
	}
	return nil
}

func anys[T any](in []T) []any {
	out := make([]any, len(in))
	for i, o := range in {
		out[i] = o
	}
	return out
}

// draManager is the DRA view the DynamicResources plugin reads, over empty
// stores: no claim, slice or class is read offline yet, so a member with
// resource claims is refused by that plugin rather than judged on devices.
func draManager(ctx context.Context, factory informers.SharedInformerFactory) (fwk.SharedDRAManager, error) {
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), nil, "ResourceClaim", "", nil)
	slices, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices()})
	if err != nil {
		return nil, fmt.Errorf("offline resource slices: %w", err)
	}
	return dynamicresources.NewDRAManager(ctx, claims, slices, factory), nil
}
