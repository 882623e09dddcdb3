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
	data, err := o.env.readInput(o.Filename)
	if err != nil {
		return nil, err
	}
	objs, err := decodeObjects(o.Filename, data, false)
	if err != nil {
		return nil, err
	}
	var extra []*unstructured.Unstructured
	for _, f := range o.PodFiles {
		data, err := o.env.readInput(f)
		if err != nil {
			return nil, err
		}
		more, err := decodeObjects(f, data, true)
		if err != nil {
			return nil, err
		}
		extra = append(extra, more...)
	}

	var own *definition.Compiled
	var ownRef defRef
	if o.Definition != "" {
		own, ownRef, err = o.compileDefinitionFile(o.Definition)
		if err != nil {
			return nil, err
		}
	}
	var defs *definitions
	if own == nil {
		if defs, err = o.env.loadDefinitions(ctx, nil); err != nil {
			return nil, err
		}
	}

	// The workloads are the objects of -f that a definition describes;
	// everything else (in -f or --pods) is a pod or an intermediate owner.
	var roots []*unstructured.Unstructured
	var comps []*definition.Compiled
	var refs []defRef
	var others []*unstructured.Unstructured
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		switch {
		case own != nil && own.RootGVK().GroupKind() == gvk.GroupKind():
			roots, comps, refs = append(roots, obj), append(comps, own), append(refs, ownRef)
		case own == nil && gvk.Kind != "Pod":
			ent, err := defs.forGVK(gvk)
			if err != nil {
				others = append(others, obj)
				continue
			}
			roots, comps = append(roots, obj), append(comps, ent.Compiled)
			refs = append(refs, defRef{Name: ent.Name, Origin: string(ent.Origin), Source: ent.Source})
		default:
			others = append(others, obj)
		}
	}
	if len(roots) == 0 {
		if own != nil {
			return nil, noDefinitionErrorf("%s: no object of kind %s (the root of %s)", o.Filename, own.RootGVK().Kind, ownRef.Name)
		}
		var kinds []string
		for _, obj := range objs {
			kinds = append(kinds, obj.GetKind())
		}
		if len(objs) == 1 && objs[0].GetKind() == "Pod" {
			// A lone pod is a workload too when the catalog defines Pod.
			if ent, err := defs.forGVK(objs[0].GroupVersionKind()); err == nil {
				roots, comps = objs, []*definition.Compiled{ent.Compiled}
				refs = []defRef{{Name: ent.Name, Origin: string(ent.Origin), Source: ent.Source}}
				others = nil
			}
		}
		if len(roots) == 0 {
			_, err := defs.forGVK(objs[0].GroupVersionKind())
			return nil, withCode(ExitNoDefinition, fmt.Errorf("%s: no workload with a definition among %s: %v", o.Filename, strings.Join(kinds, ", "), err))
		}
	}
	others = append(others, extra...)

	// Index pods and owners; a pod belongs to the workload its owner chain
	// reaches, or to the only workload when the chain cannot be followed.
	byUID := map[types.UID]metav1.Object{}
	var pods []*corev1.Pod
	for _, obj := range others {
		byUID[obj.GetUID()] = obj
		if obj.GetKind() == "Pod" && obj.GroupVersionKind().Group == "" {
			p, err := toPod(obj)
			if err != nil {
				return nil, err
			}
			pods = append(pods, p)
		}
	}
	for _, r := range roots {
		byUID[r.GetUID()] = r
	}
	w := newOwnerWalker(func(_ context.Context, _ string, ref metav1.OwnerReference) (metav1.Object, error) {
		return byUID[ref.UID], nil
	})
	// A referenced object (a TrainJob's runtime) may be in any of the files.
	docRefs := offlineRefs(append(append([]*unstructured.Unstructured(nil), objs...), extra...))
	var out []*Description
	for i, root := range roots {
		var mine []*corev1.Pod
		for _, p := range pods {
			ok := false
			if root.GetUID() != "" {
				ok, _ = w.reaches(ctx, p, root.GetUID())
			}
			if ok || len(roots) == 1 {
				mine = append(mine, p)
			}
		}
		rctx, refWarnings := docRefs.bind(ctx, comps[i], root)
		d, err := buildDescription(rctx, describeInput{
			Root: root, Def: refs[i], Compiled: comps[i], Pods: mine,
			Now: o.env.Now(), PodLimit: o.PodLimit, GPUNames: o.env.gpuNames(),
			Warnings: refWarnings,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
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
