package cli

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/definition"
)

// runOffline describes every workload of the manifest without a cluster.
func (o *DescribeOptions) runOffline(ctx context.Context) ([]*Description, error) {
	objs, extra, err := o.readManifests()
	if err != nil {
		return nil, err
	}
	src, err := o.offlineSource(ctx)
	if err != nil {
		return nil, err
	}
	wls, others, err := src.workloads(o.Filename, objs)
	if err != nil {
		return nil, err
	}
	attr, err := newPodAttribution(append(others, extra...), wls)
	if err != nil {
		return nil, err
	}
	// A referenced object (a TrainJob's runtime) may be in any of the files.
	docRefs := offlineRefs(append(append([]*unstructured.Unstructured(nil), objs...), extra...))
	var out []*Description
	for _, wl := range wls {
		in := describeInput{
			Root: wl.root, Def: wl.def, Compiled: wl.compiled, Pods: attr.podsOf(ctx, wl.root),
			Now: o.env.Now(), PodLimit: o.PodLimit, GPUNames: o.env.gpuNames(),
		}
		var rctx context.Context
		rctx, in.Warnings = docRefs.bind(ctx, wl.compiled, wl.root)
		d, err := buildDescription(rctx, in)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// readManifests decodes the objects of -f and of every --pods file.
func (o *DescribeOptions) readManifests() (objs, extra []*unstructured.Unstructured, err error) {
	data, err := o.env.readInput(o.Filename)
	if err != nil {
		return nil, nil, err
	}
	if objs, err = decodeObjects(o.Filename, data, false); err != nil {
		return nil, nil, err
	}
	for _, f := range o.PodFiles {
		data, err := o.env.readInput(f)
		if err != nil {
			return nil, nil, err
		}
		more, err := decodeObjects(f, data, true)
		if err != nil {
			return nil, nil, err
		}
		extra = append(extra, more...)
	}
	return objs, extra, nil
}

// offlineWorkload is one workload of -f and the definition describing it.
type offlineWorkload struct {
	root     *unstructured.Unstructured
	def      defRef
	compiled *definition.Compiled
}

// offlineSource is where describe -f finds definitions: the one
// --definition gives (own), else the embedded catalog (defs).
type offlineSource struct {
	own    *definition.Compiled
	ownRef defRef
	defs   *definitions
}

func (o *DescribeOptions) offlineSource(ctx context.Context) (*offlineSource, error) {
	s := &offlineSource{}
	var err error
	if o.Definition != "" {
		s.own, s.ownRef, err = o.compileDefinitionFile(o.Definition)
	} else {
		s.defs, err = o.env.loadDefinitions(ctx, nil)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// workloads splits the objects of -f into the workloads a definition
// describes and the rest, pods and intermediate owners.
func (s *offlineSource) workloads(file string, objs []*unstructured.Unstructured) ([]offlineWorkload, []*unstructured.Unstructured, error) {
	var wls []offlineWorkload
	var others []*unstructured.Unstructured
	for _, obj := range objs {
		if wl, ok := s.workload(obj); ok {
			wls = append(wls, wl)
		} else {
			others = append(others, obj)
		}
	}
	if len(wls) > 0 {
		return wls, others, nil
	}
	return s.loneWorkload(file, objs)
}

// workload says whether obj is a workload and which definition describes
// it. Without --definition a pod is a pod of a workload, not one.
func (s *offlineSource) workload(obj *unstructured.Unstructured) (offlineWorkload, bool) {
	gvk := obj.GroupVersionKind()
	if s.own != nil {
		return offlineWorkload{obj, s.ownRef, s.own}, s.own.RootGVK().GroupKind() == gvk.GroupKind()
	}
	if gvk.Kind == "Pod" {
		return offlineWorkload{}, false
	}
	ent, err := s.defs.forGVK(gvk)
	if err != nil {
		return offlineWorkload{}, false
	}
	return offlineWorkload{obj, entryRef(ent), ent.Compiled}, true
}

// loneWorkload is the answer when no object of -f is a workload: a lone pod
// is one when the catalog defines Pod; anything else has no definition.
func (s *offlineSource) loneWorkload(file string, objs []*unstructured.Unstructured) ([]offlineWorkload, []*unstructured.Unstructured, error) {
	if s.own != nil {
		return nil, nil, noDefinitionErrorf("%s: no object of kind %s (the root of %s)", file, s.own.RootGVK().Kind, s.ownRef.Name)
	}
	if len(objs) == 1 && objs[0].GetKind() == "Pod" {
		if ent, err := s.defs.forGVK(objs[0].GroupVersionKind()); err == nil {
			return []offlineWorkload{{objs[0], entryRef(ent), ent.Compiled}}, nil, nil
		}
	}
	var kinds []string
	for _, obj := range objs {
		kinds = append(kinds, obj.GetKind())
	}
	_, err := s.defs.forGVK(objs[0].GroupVersionKind())
	return nil, nil, withCode(ExitNoDefinition, fmt.Errorf("%s: no workload with a definition among %s: %v", file, strings.Join(kinds, ", "), err))
}

// podAttribution gives each workload of -f its pods: a pod belongs to the
// workload its owner chain reaches, or to the only workload when the chain
// cannot be followed.
type podAttribution struct {
	pods   []*corev1.Pod
	walker *ownerWalker
	single bool
}

// newPodAttribution indexes the pods and owners among objs, and the
// workloads, by UID.
func newPodAttribution(objs []*unstructured.Unstructured, wls []offlineWorkload) (*podAttribution, error) {
	byUID := map[types.UID]metav1.Object{}
	a := &podAttribution{single: len(wls) == 1}
	for _, obj := range objs {
		byUID[obj.GetUID()] = obj
		if obj.GetKind() == "Pod" && obj.GroupVersionKind().Group == "" {
			p, err := toPod(obj)
			if err != nil {
				return nil, err
			}
			a.pods = append(a.pods, p)
		}
	}
	for _, wl := range wls {
		byUID[wl.root.GetUID()] = wl.root
	}
	a.walker = newOwnerWalker(func(_ context.Context, _ string, ref metav1.OwnerReference) (metav1.Object, error) {
		return byUID[ref.UID], nil
	})
	return a, nil
}

// podsOf returns the pods of the workload root.
func (a *podAttribution) podsOf(ctx context.Context, root *unstructured.Unstructured) []*corev1.Pod {
	var mine []*corev1.Pod
	for _, p := range a.pods {
		ok := false
		if root.GetUID() != "" {
			ok, _ = a.walker.reaches(ctx, p, root.GetUID())
		}
		if ok || a.single {
			mine = append(mine, p)
		}
	}
	return mine
}

// compileDefinitionFile reads one definition for --definition.
func (o *DescribeOptions) compileDefinitionFile(name string) (*definition.Compiled, defRef, error) {
	data, err := o.env.readInput(name)
	if err != nil {
		return nil, defRef{}, err
	}
	kartas, err := definition.DecodeAll(data)
	if err != nil {
		return nil, defRef{}, invalidErrorf("%s: %v", name, err)
	}
	if len(kartas) != 1 {
		return nil, defRef{}, usageErrorf("%s: --definition takes one definition, found %d", name, len(kartas))
	}
	if definition.IsLegacy(kartas[0]) {
		o.env.warnf("%s: %s", name, definition.LegacyNotice(kartas[0].Name))
	}
	c, err := definition.Compile(kartas[0], o.env.definitionOptions())
	if err != nil {
		return nil, defRef{}, invalidErrorf("%s: %s (run \"muster validate %s\" for every problem)", name, validationSummary(err), name)
	}
	return c, defRef{Name: kartas[0].Name, Origin: "file", Source: name}, nil
}
