package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/naming"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// fitWorkload is one workload to place: its gangs in the order they are
// placed.
type fitWorkload struct {
	root   *unstructured.Unstructured
	ns     string
	def    string
	source string // "file", "live" or "spec"
	gangs  []*fitGang
	note   string
}

// fitGang is one gang to place, as the scheduler plugin sees it.
type fitGang struct {
	name       string // the PodGroup's name, or a stand-in for a grouped gang not created yet
	podGroup   string // "" when the name is not known before the pods exist
	definition string
	// key is "namespace/name", the way the plugin names the gang in its
	// messages.
	key       string
	minMember int
	pending   []*corev1.Pod
	placed    []string // nodes of bound members
	bound     []*corev1.Pod
	topology  plan.Topology
	// recorded is the priority the pod-grouper recorded on a live
	// PodGroup, with its class.
	recorded      *int32
	recordedClass string
	// blocked is a reason known without planning: the scheduler would not
	// plan the gang either (PodGroup missing), or fit cannot tell its
	// members.
	blocked string
	// blockedVerdict is the verdict that goes with blocked.
	blockedVerdict string
	// native: a native PodGroup (scheduling.k8s.io/v1beta1) its members
	// name, which the scheduler's in-tree GangScheduling plugin places.
	native bool
}

// fileWorkloads picks the workloads of a manifest: the objects whose kind
// has a definition (a Pod only when it is the file's only workload).
func (o *FitOptions) fileWorkloads(ctx context.Context, objs []*unstructured.Unstructured, defs *definitions, ns string) ([]*fitWorkload, []string, error) {
	var roots, pods []*unstructured.Unstructured
	var skipped []string
	for _, obj := range objs {
		if _, err := defs.forGVK(obj.GroupVersionKind()); err != nil {
			skipped = append(skipped, obj.GetKind()+"/"+obj.GetName())
			continue
		}
		if obj.GetKind() == "Pod" && obj.GroupVersionKind().Group == "" {
			pods = append(pods, obj)
			continue
		}
		roots = append(roots, obj)
	}
	if len(roots) == 0 {
		roots = pods
	}
	if len(roots) == 0 {
		var kinds []string
		for _, obj := range objs {
			kinds = append(kinds, obj.GetKind())
		}
		_, err := defs.forGVK(objs[0].GroupVersionKind())
		return nil, nil, withCode(ExitNoDefinition, fmt.Errorf("%s: no workload with a definition among %s: %v", o.Filename, strings.Join(kinds, ", "), err))
	}
	var warnings []string
	if len(skipped) > 0 {
		warnings = append(warnings, fmt.Sprintf("not evaluated (no definition, or pods of a workload in the file): %s", strings.Join(skipped, ", ")))
	}
	var out []*fitWorkload
	docRefs := offlineRefs(objs)
	for _, r := range roots {
		rctx := ctx
		if ent, err := defs.forGVK(r.GroupVersionKind()); err == nil {
			var refWarnings []string
			rctx, refWarnings = docRefs.bind(ctx, ent.Compiled, r)
			warnings = append(warnings, refWarnings...)
		}
		w, err := specWorkload(rctx, r, defs, ns, "file")
		if err != nil {
			return nil, nil, err
		}
		out = append(out, w)
	}
	return out, warnings, nil
}

// specWorkload derives the gangs of a workload from its spec alone.
func specWorkload(ctx context.Context, root *unstructured.Unstructured, defs *definitions, ns, source string) (*fitWorkload, error) {
	ent, err := defs.forGVK(root.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if root.GetNamespace() != "" {
		ns = root.GetNamespace()
	}
	w := &fitWorkload{root: root, ns: ns, def: ent.Name, source: source}
	w.gangs, err = specGangs(ctx, root, ent, ns)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// memberTemplate is one pod template of a gang instance and how many of
// its pods one instance has.
type memberTemplate struct {
	label string
	tpl   *corev1.PodTemplateSpec
	n     int64
}

// specGangs makes the gangs the pod-grouper would create for root, with
// member pods built from the pod templates. A whole-workload gang gets every
// pod of its counted components; a grouped gang's instances share those
// pods equally, which holds when the definition yields one plan for it (all
// scope instances alike). When the scope instances differ, fit cannot tell
// which pods form which gang from the spec, and says so.
func specGangs(ctx context.Context, root *unstructured.Unstructured, ent *catalog.Entry, ns string) ([]*fitGang, error) {
	c := ent.Compiled
	plans, err := c.GangPlans(ctx, root)
	if err != nil {
		return nil, invalidErrorf("%s %s: gangs: %v", root.GetKind(), root.GetName(), err)
	}
	if len(plans) == 0 {
		return nil, nil
	}
	wl, err := c.Extract(ctx, root)
	if err != nil {
		return nil, invalidErrorf("%s %s: %v", root.GetKind(), root.GetName(), err)
	}
	comps := map[string]*definition.Component{}
	children := map[string][]string{}
	for i := range wl.Components {
		comp := &wl.Components[i]
		comps[comp.Name] = comp
		children[comp.Parent] = append(children[comp.Parent], comp.Name)
	}
	instances, plansPer := map[string]int{}, map[string]int{}
	for _, p := range plans {
		instances[p.Definition] += p.Instances
		plansPer[p.Definition]++
	}
	var out []*fitGang
	for _, gp := range plans {
		total := int64(instances[gp.Definition])
		derivable := plansPer[gp.Definition] == 1 && total > 0
		var members []memberTemplate
		for _, cn := range countedComponents(gp.Members, comps, children) {
			for _, in := range comps[cn].Instances {
				if in.Template == nil || in.Pods == 0 {
					continue
				}
				if in.Pods%total != 0 {
					derivable = false
				}
				label := in.ID
				if label == "" {
					label = cn
				}
				members = append(members, memberTemplate{label: label, tpl: in.Template, n: in.Pods / total})
			}
		}
		pgName, whole := naming.WholeWorkloadName(root.GetName(), c.Definition(), gp.Definition)
		if oi := c.Definition().Spec.OptimizationInstructions; !whole && (oi == nil || oi.GangScheduling == nil) {
			// The whole-workload gang muster.io/min-member makes on a kind
			// the definition does not gang: named as the pod-grouper names it.
			pgName, whole = naming.PodGroupName(root.GetName(), c.Definition(), gp.Definition, nil), true
		}
		topo := plan.Topology{Key: gp.TopologyPreferred}
		if gp.TopologyRequired != "" {
			topo = plan.Topology{Key: gp.TopologyRequired, Required: true}
		}
		for i := range gp.Instances {
			g := &fitGang{definition: gp.Definition, minMember: max(int(gp.MinMember), 1), topology: topo}
			if whole && gp.Instances == 1 {
				g.name, g.podGroup = pgName, pgName
			} else {
				// One PodGroup per key, named after pod values the spec does
				// not hold: a stand-in name, index by index.
				g.name = fmt.Sprintf("%s-%s[%d]", root.GetName(), gp.Definition, len(out))
			}
			g.key = ns + "/" + g.name
			if !derivable {
				g.blocked, g.blockedVerdict = fmt.Sprintf("the %d instances of gang %q differ in size; fit cannot tell from the spec which pods form which one (submit the workload and run muster fit %s/%s)",
					total, gp.Definition, strings.ToLower(root.GetKind()), root.GetName()), verdictUnknown
			} else {
				g.pending = memberPods(members, root, ns, g.name, i)
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// countedComponents are the pod-bearing components a gang counts: each
// member with pods, else its pod-bearing descendants (as the definition
// engine counts them).
func countedComponents(members []string, comps map[string]*definition.Component, children map[string][]string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(string)
	walk = func(n string) {
		comp := comps[n]
		if comp == nil {
			return
		}
		if comp.HasPods {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
			return
		}
		for _, ch := range children[n] {
			walk(ch)
		}
	}
	for _, m := range members {
		walk(m)
	}
	return out
}

// memberPods builds the pending members of one gang instance from the
// templates, defaulted as the API server would default the pods (requests
// from limits), with names for people ("workers-1") and unique UIDs.
func memberPods(members []memberTemplate, root *unstructured.Unstructured, ns, gang string, instance int) []*corev1.Pod {
	var out []*corev1.Pod
	for _, m := range members {
		for k := range m.n {
			p := &corev1.Pod{
				ObjectMeta: *m.tpl.ObjectMeta.DeepCopy(),
				Spec:       *m.tpl.Spec.DeepCopy(),
			}
			p.Namespace = ns
			p.Name = fmt.Sprintf("%s-%d", m.label, k)
			p.UID = types.UID(fmt.Sprintf("fit/%s/%s/%d/%s/%d", root.GetUID(), gang, instance, m.label, k))
			corev1defaults.SetObjectDefaults_Pod(p)
			out = append(out, p)
		}
	}
	return out
}

// liveWorkload reads a submitted workload and its gangs: the PodGroups its
// pods are labelled with, each with every live pod of the namespace
// labelled for it (the plugin's members), its PodGroup's min-member and
// topology; and the native PodGroups its pods name (nativeFitGangs). A
// workload whose pods are in no PodGroup yet is evaluated from its spec.
func (o *FitOptions) liveWorkload(ctx context.Context, c *Cluster, defs *definitions, ns string) (*fitWorkload, error) {
	rt, err := resolveType(c.Mapper, o.typeArg)
	if err != nil {
		if isUnreachable(err) {
			return nil, apiError("discover types", err)
		}
		return nil, unknownTypeError(o.typeArg, defs, c)
	}
	ent, err := defs.forGVK(rt.GVK)
	if err != nil {
		return nil, err
	}
	f := startLiveFetch(ctx, c, rt.Mapping, ns, o.nameArg)
	if f.namespaced {
		f.owners.prefetch(ctx, ns, childKinds(ent.Compiled.Definition()))
	}
	root, err := f.waitRoot(rt, o.nameArg, ns)
	if err != nil {
		return nil, err
	}
	ctx, refWarnings := liveRefs(c).bind(ctx, ent.Compiled, root)
	for _, msg := range refWarnings {
		o.env.warnf("%s %s: %s", root.GetKind(), root.GetName(), msg)
	}
	f.wg.Wait()
	if !f.namespaced {
		return specWorkload(ctx, root, defs, ns, "spec")
	}
	if f.podsErr != nil {
		return nil, apiError("list pods in "+ns, f.podsErr)
	}
	mine, err := workloadPods(ctx, f.owners, root, f.pods)
	if err != nil {
		return nil, err
	}
	var names []string
	seen := map[string]bool{}
	for _, p := range mine {
		if n := p.Labels[api.LabelPodGroup]; n != "" && !seen[n] && p.Spec.SchedulingGroup == nil {
			seen[n] = true
			names = append(names, n)
		}
	}
	var natives []string
	if f.nativeServed {
		natives = nativeGroupNames(mine)
	}
	if len(names) == 0 && len(natives) == 0 {
		w, err := specWorkload(ctx, root, defs, ns, "spec")
		if err == nil && len(w.gangs) > 0 {
			w.note = "no pod is in a PodGroup yet: the gangs are the ones the spec yields"
		}
		return w, err
	}
	w := &fitWorkload{root: root, ns: ns, def: ent.Name, source: "live"}
	if len(names) > 0 {
		if f.podGroupsErr != nil {
			return nil, apiError("list PodGroups in "+ns, f.podGroupsErr)
		}
		w.gangs = pluginFitGangs(f, ns, names)
	}
	if len(natives) > 0 {
		if f.nativePodGroupsErr != nil {
			return nil, apiError("list native PodGroups in "+ns, f.nativePodGroupsErr)
		}
		w.gangs = append(w.gangs, nativeFitGangs(f, ns, natives)...)
	}
	return w, nil
}

// pluginFitGangs are the gangs of the scheduler-plugins PodGroups names,
// each with every live pod of the namespace labelled for it (the
// plugin's members), its min-member, recorded priority and topology.
func pluginFitGangs(f *liveFetch, ns string, names []string) []*fitGang {
	pgs := map[string]*unstructured.Unstructured{}
	for i := range f.podGroups {
		pgs[f.podGroups[i].GetName()] = &f.podGroups[i]
	}
	sort.Strings(names)
	var gangs []*fitGang
	for _, n := range names {
		g := &fitGang{name: n, podGroup: n, key: ns + "/" + n, minMember: 1}
		g.addMembers(f.pods, func(p *corev1.Pod) bool {
			return p.Labels[api.LabelPodGroup] == n && p.Spec.SchedulingGroup == nil
		})
		pg := pgs[n]
		if pg == nil {
			// The plugin's own words when it has no PodGroup.
			g.blocked, g.blockedVerdict = plan.PodGroupNotFound(g.key), verdictNoFit
			gangs = append(gangs, g)
			continue
		}
		g.definition = pg.GetLabels()[api.LabelDefinition]
		if prio, ok := api.PodGroupPriority(pg.GetAnnotations()); ok {
			g.recorded, g.recordedClass = &prio, pg.GetAnnotations()[api.AnnotationPriorityClass]
		}
		if mm, ok, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); ok && mm > 1 {
			g.minMember = int(mm)
		}
		if k := pg.GetAnnotations()[api.AnnotationTopologyRequired]; k != "" {
			g.topology = plan.Topology{Key: k, Required: true}
		} else if k := pg.GetAnnotations()[api.AnnotationTopologyPreferred]; k != "" {
			g.topology = plan.Topology{Key: k}
		}
		gangs = append(gangs, g)
	}
	return gangs
}

// addMembers adds the live pods of pods that are the gang's members: the
// bound ones stay where they are, the others are placed.
func (g *fitGang) addMembers(pods []corev1.Pod, member func(*corev1.Pod) bool) {
	for i := range pods {
		p := &pods[i]
		if !member(p) || !plan.Live(p) {
			continue
		}
		if p.Spec.NodeName != "" {
			g.placed = append(g.placed, p.Spec.NodeName)
			g.bound = append(g.bound, p)
		} else {
			g.pending = append(g.pending, p)
		}
	}
}

// gpuNeeds sums the GPUs the workload's spec asks for, by resource name:
// what a quota system counts.
func (w *fitWorkload) gpuNeeds(ctx context.Context, defs *definitions, names []corev1.ResourceName) map[string]int64 {
	ent, err := defs.forGVK(w.root.GroupVersionKind())
	if err != nil {
		return nil
	}
	wl, err := ent.Compiled.Extract(ctx, w.root)
	if err != nil {
		return nil
	}
	out := map[string]int64{}
	for _, c := range wl.Components {
		if !c.HasPods {
			continue
		}
		for _, inst := range c.Instances {
			if inst.Template == nil {
				continue
			}
			req := definition.PodRequests(&inst.Template.Spec)
			for _, n := range names {
				if q, ok := req[n]; ok {
					out[string(n)] += q.Value() * inst.Pods
				}
			}
		}
	}
	return out
}
