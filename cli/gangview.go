package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/muster-io/muster/api"
	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/naming"
)

// addGangs adds the gang instances the pods form, named by their PodGroup,
// then the workload's PodGroups no pod of the view points to (pods not
// created yet, or deleted), and gives each pod shown its gang's name.
func addGangs(d *Description, in describeInput, gangs *gangSet) {
	usedPG, usedNative := map[string]bool{}, map[string]bool{}
	podGang := map[string]string{}
	for _, key := range gangs.order {
		agg := gangs.byKey[key]
		gv := agg.view(in)
		if gv.Native {
			usedNative[gv.Name] = true
		} else {
			usedPG[gv.Name] = true
		}
		for _, p := range agg.pods {
			podGang[p.Name] = gv.Name
		}
		if w := agg.splitWarning(gv); w != "" {
			d.Warnings = append(d.Warnings, w)
		}
		d.Gangs = append(d.Gangs, gv)
	}
	for _, n := range podGroupsWithoutPods(in.PodGroups, usedPG) {
		// Counted over every pod labelled with it: a pod viewed alone
		// (describe pod/<member>) is one member of a gang its definition
		// does not know, and the gang is still all of them.
		pg := in.PodGroups[n]
		agg := &gangAgg{gang: &definition.Gang{MinMember: pg.MinMember}, pods: in.GangPods[n], pgNames: map[string]int{n: 1}}
		gv := agg.view(in)
		for _, p := range in.Pods {
			if p.Labels[api.LabelPodGroup] == n {
				podGang[p.Name] = n
			}
		}
		d.Gangs = append(d.Gangs, gv)
	}
	addNativeWithoutGang(d, in, usedNative, podGang)
	for ci := range d.Components {
		for ii := range d.Components[ci].Instances {
			items := d.Components[ci].Instances[ii].Items
			for k := range items {
				items[k].Gang = podGang[items[k].Name]
			}
		}
	}
}

// podGroupsWithoutPods lists, sorted, the PodGroups of pgs not in used.
func podGroupsWithoutPods(pgs map[string]*podGroupInfo, used map[string]bool) []string {
	var names []string
	for n := range pgs {
		if !used[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// addPlans adds what each gang definition yields on the spec alone.
func addPlans(ctx context.Context, d *Description, in describeInput) {
	plans, err := in.Compiled.GangPlans(ctx, in.Root)
	if err != nil {
		d.Warnings = append(d.Warnings, fmt.Sprintf("gang plans: %v", err))
	}
	for _, p := range plans {
		pg := planPodGroupName(in.Root.GetName(), in.Compiled.Definition(), p.Definition)
		if pg != "" {
			pg = nativePlanName(in, p.Definition, pg)
		}
		d.Plans = append(d.Plans, GangPlanView{
			Definition: p.Definition, PodGroup: pg, Members: nonNil(p.Members), Instances: p.Instances, MinMember: p.MinMember,
			MinResources: resourceMap(p.MinResources), TopologyRequired: p.TopologyRequired, TopologyPreferred: p.TopologyPreferred,
		})
	}
}

// gangAgg collects the pods of one gang instance.
type gangAgg struct {
	gang    *definition.Gang
	pods    []*corev1.Pod
	pgNames map[string]int
	// nativeNames counts the native PodGroups its pods name
	// (spec.schedulingGroup, which the scheduler follows before a label),
	// labelOnly its pods labelled for a PodGroup that name none.
	nativeNames map[string]int
	labelOnly   int
}

// gangSet collects the gang instances the pods form, in the order their
// first pods come.
type gangSet struct {
	byKey map[string]*gangAgg
	order []string
}

func (s *gangSet) add(g *definition.Gang, pod *corev1.Pod) {
	key := g.Definition + "\x00" + strings.Join(g.Keys, "\x00")
	agg := s.byKey[key]
	if agg == nil {
		agg = &gangAgg{gang: g, pgNames: map[string]int{}, nativeNames: map[string]int{}}
		s.byKey[key] = agg
		s.order = append(s.order, key)
	}
	agg.pods = append(agg.pods, pod)
	native := nativeGroupOf(pod)
	if native != "" {
		agg.nativeNames[native]++
	}
	if n := pod.Labels[api.LabelPodGroup]; n != "" {
		agg.pgNames[n]++
		if native == "" {
			agg.labelOnly++
		}
	}
}

func (a *gangAgg) view(in describeInput) GangView {
	if n := a.nativeName(in); n != "" {
		return a.nativeView(in, n)
	}
	g := a.gang
	gv := GangView{
		Definition:   g.Definition,
		Keys:         g.Keys,
		Members:      g.Members,
		MinMember:    g.MinMember,
		MinResources: resourceMap(g.MinResources),
	}
	// The PodGroup is the one the pods are labelled with; the pod-grouper
	// labels them all alike, so the most common label is the gang's.
	best := 0
	for n, c := range a.pgNames {
		if c > best || (c == best && n < gv.Name) {
			gv.Name, best = n, c
		}
	}
	if gv.Name == "" {
		// No pod is labelled yet (offline, or before the pod-grouper saw
		// them): the name the pod-grouper gives this gang's PodGroup.
		gv.Name = naming.PodGroupName(in.Root.GetName(), in.Compiled.Definition(), g.Definition, g.Keys)
	}
	pg := in.PodGroups[gv.Name]
	if pg != nil {
		gv.PodGroupFound = true
		if pg.MinMember > 0 {
			gv.MinMember = pg.MinMember
		}
		if len(pg.MinResources) > 0 {
			gv.MinResources = pg.MinResources
		}
		gv.Priority, gv.PriorityClass = pg.Priority, pg.PriorityClass
	}
	// Counted from the pods as they are now, so bound never exceeds the
	// members however the gang was scaled; over every member of the
	// PodGroup when it is known, not only the members in this view.
	members := a.pods
	if ps, ok := in.GangPods[gv.Name]; ok && pg != nil {
		members = ps
	}
	for _, p := range members {
		if !gangMember(p) {
			continue
		}
		gv.Pods++
		if p.Spec.NodeName != "" {
			gv.Bound++
		}
	}
	switch {
	case pg != nil && pg.Phase != "":
		gv.Phase = pg.Phase
	case int32(gv.Bound) >= gv.MinMember && gv.Bound > 0:
		gv.Phase = "Bound"
	case !in.Live:
		// Offline the gang is what the pod-grouper would create.
		gv.Phase = "Planned"
	default:
		gv.Phase = "Pending"
	}
	if int32(gv.Bound) < gv.MinMember {
		gv.Reason = a.pendingReason(in, gv, pg != nil)
	}
	gv.Elastic = elasticOf(gv)
	return gv
}

// elasticOf splits an elastic gang (more members than its minMember) into
// the quorum, placed all or nothing, and the extras above it, placed one by
// one; nil for any other gang. The counts are the ones the scheduler puts in
// its GangElastic event (plugins/gang: elasticSummary), so both read alike.
func elasticOf(gv GangView) *ElasticView {
	if gv.MinMember <= 0 || int32(gv.Pods) <= gv.MinMember {
		return nil
	}
	quorum := min(int32(gv.Bound), gv.MinMember)
	return &ElasticView{
		Quorum: gv.MinMember, QuorumBound: quorum,
		Extras: int32(gv.Pods) - gv.MinMember, ExtrasBound: int32(gv.Bound) - quorum,
	}
}

// planPodGroupName is the PodGroup name of a gang plan when the spec alone
// tells it, else "" (a grouped gang: one PodGroup per key, named after pod
// values). A definition without gangs gets one only through the
// muster.io/min-member override: the whole workload, named after the root
// component, which the pod-grouper names as every whole-workload gang.
func planPodGroupName(workload string, k *kartav1alpha1.Karta, gangDef string) string {
	if n, ok := naming.WholeWorkloadName(workload, k, gangDef); ok {
		return n
	}
	if k != nil && gangDef == k.Spec.StructureDefinition.RootComponent.Name && !hasGangInstruction(k) {
		return naming.PodGroupName(workload, k, gangDef, nil)
	}
	return ""
}

func hasGangInstruction(k *kartav1alpha1.Karta) bool {
	oi := k.Spec.OptimizationInstructions
	return oi != nil && oi.GangScheduling != nil && (len(oi.GangScheduling.PodGroups) > 0 || oi.GangScheduling.PodGroup != nil)
}

// gangMember says whether a pod of a gang counts as one of its members: a
// pod being deleted or failed is on its way out (its controller replaces
// it); a pod that ran to completion still counts.
func gangMember(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed
}

// pendingReason says in plain words why a gang is not bound: too few
// members for the current minMember, else what the scheduler said on its
// pods or PodGroup, else what it waits for. The member count comes first:
// the scheduler holds back the members of a gang short of its quorum
// without touching their condition, which may still carry the reason of
// an earlier size.
func (a *gangAgg) pendingReason(in describeInput, gv GangView, pgFound bool) string {
	if int32(gv.Pods) < gv.MinMember {
		return fmt.Sprintf("waiting for pods: %d of %d created", gv.Pods, gv.MinMember)
	}
	msgs := map[string]int{}
	for _, p := range a.pods {
		if p.Spec.NodeName != "" || !gangMember(p) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				msgs[c.Message]++
			}
		}
	}
	if m := mostCommon(msgs); m != "" {
		return m
	}
	if m := in.SchedulingEvents["PodGroup/"+gv.Name]; m != "" {
		return m
	}
	for _, p := range a.pods {
		if m := in.SchedulingEvents["Pod/"+p.Name]; m != "" && p.Spec.NodeName == "" && gangMember(p) {
			msgs[m]++
		}
	}
	if m := mostCommon(msgs); m != "" {
		return m
	}
	if in.Live && !pgFound {
		return "no PodGroup yet: is the muster pod-grouper running?"
	}
	if in.Live {
		return "waiting for the scheduler"
	}
	return ""
}

func mostCommon(m map[string]int) string {
	best, n := "", 0
	for k, c := range m {
		if c > n || (c == n && k < best) {
			best, n = k, c
		}
	}
	return best
}
