package cli

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/naming"
)

// nativeName is the native PodGroup the gang's pods name (the most common
// one), "" when none does or the native PodGroups are not known (the API
// not served, or not readable): the gang is then shown as a
// scheduler-plugins one.
func (a *gangAgg) nativeName(in describeInput) string {
	if in.NativePodGroups == nil {
		return ""
	}
	return mostCommon(a.nativeNames)
}

// splitWarning says when a gang's pods are split across PodGroups of the
// two APIs: the scheduler places the parts apart, never as one gang, and
// the immutable spec.schedulingGroup keeps them apart until the pods are
// recreated.
func (a *gangAgg) splitWarning(gv GangView) string {
	if !gv.Native || a.labelOnly == 0 {
		return ""
	}
	native := 0
	for _, c := range a.nativeNames {
		native += c
	}
	return fmt.Sprintf("gang %s is split: %d pods name a native PodGroup (spec.schedulingGroup), %d are in a scheduler-plugins PodGroup (label): the parts are placed apart, never as one gang, until the pods are recreated in one of them",
		gv.Name, native, a.labelOnly)
}

// nativeView is the gang of a native PodGroup: its minCount, its members
// (every pod of the namespace naming it), how many are scheduled and
// ready, and while it is short of its quorum what the scheduler says.
func (a *gangAgg) nativeView(in describeInput, name string) GangView {
	g := a.gang
	gv := GangView{Name: name, Definition: g.Definition, Keys: g.Keys, Members: g.Members, MinMember: g.MinMember,
		MinResources: resourceMap(g.MinResources), Native: true}
	pg := in.NativePodGroups[name]
	nv := &NativePodGroupView{APIVersion: nativePodGroupAPIVersion, Policy: "gang"}
	if pg != nil {
		gv.PodGroupFound = true
		gv.MinMember = pg.MinMember
		if pg.Basic {
			nv.Policy = "basic"
		}
		gv.Priority, gv.PriorityClass = pg.Priority, pg.PriorityClass
		nv.InitiallyScheduled = pg.InitiallyScheduled
	}
	// The members are the pods naming it, as the scheduler counts them,
	// also those outside this view (describe pod/<one member>).
	members := a.pods
	if in.NativeGangPods != nil {
		members = in.NativeGangPods[name]
	}
	var pending []*corev1.Pod
	for _, p := range members {
		if !gangMember(p) {
			continue
		}
		gv.Pods++
		switch {
		case p.Spec.NodeName == "":
			pending = append(pending, p)
		default:
			gv.Bound++
			if podutils.IsPodReady(p) || p.Status.Phase == corev1.PodSucceeded {
				nv.Ready++
			}
		}
	}
	nv.MinCount, nv.Members, nv.Scheduled = gv.MinMember, gv.Pods, gv.Bound
	nv.Summary = fmt.Sprintf("%d of %d members scheduled, %d ready", gv.Bound, max(gv.MinMember, int32(gv.Pods)), nv.Ready)
	nv.LastFailedScheduling = newestFailedScheduling(in, pending)
	switch {
	case pg != nil && pg.Phase != "":
		gv.Phase = pg.Phase
	case int32(gv.Bound) >= gv.MinMember && gv.Bound > 0:
		gv.Phase = "Bound"
	default:
		gv.Phase = "Pending"
	}
	if int32(gv.Bound) < gv.MinMember {
		gv.Reason = nativePendingReason(in, gv, pg, pending, nv.LastFailedScheduling)
	}
	gv.NativePodGroup = nv
	return gv
}

// nativePendingReason says why a native gang is short of its quorum: too
// few members (the scheduler holds them before any attempt, without a
// condition), no PodGroup (it holds them until one exists, with no
// timeout), else the scheduler's PodGroupInitiallyScheduled message with
// the newest FailedScheduling event of a member when that says more, else
// the members' PodScheduled message.
func nativePendingReason(in describeInput, gv GangView, pg *podGroupInfo, pending []*corev1.Pod, ev *SchedulingEventView) string {
	switch {
	case int32(gv.Pods) < gv.MinMember:
		return fmt.Sprintf("waiting for pods: %d of %d created", gv.Pods, gv.MinMember)
	case pg == nil:
		return fmt.Sprintf("native PodGroup %s not found: the scheduler holds its pods until it exists (the muster pod-grouper creates it in native mode: is it running?)", gv.Name)
	}
	reason := ""
	if c := pg.InitiallyScheduled; c != nil && c.Status != "True" && c.Message != "" {
		reason = c.Message
	}
	if reason == "" {
		msgs := map[string]int{}
		for _, p := range pending {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
					msgs[c.Message]++
				}
			}
		}
		reason = mostCommon(msgs)
	}
	if ev != nil && !strings.Contains(reason, ev.Message) {
		if reason == "" {
			return ev.Message
		}
		return fmt.Sprintf("%s; newest FailedScheduling (pod %s): %s", reason, ev.Pod, ev.Message)
	}
	if reason == "" {
		return "waiting for the scheduler"
	}
	return reason
}

// newestFailedScheduling is the newest FailedScheduling event of the
// pending members, nil when none has one.
func newestFailedScheduling(in describeInput, pending []*corev1.Pod) *SchedulingEventView {
	var best *SchedulingEventView
	var bestAt time.Time
	for _, p := range pending {
		m := in.SchedulingEvents["Pod/"+p.Name]
		if m == "" {
			continue
		}
		at := in.SchedulingEventTimes["Pod/"+p.Name]
		if best == nil || at.After(bestAt) || (at.Equal(bestAt) && p.Name < best.Pod) {
			best, bestAt = &SchedulingEventView{Pod: p.Name, Message: m}, at
			if !at.IsZero() {
				best.Time = at.UTC().Format(time.RFC3339)
			}
		}
	}
	return best
}

// addNativeWithoutGang adds the workload's native PodGroups no gang of
// the definition took: those of a gang whose pods do not exist yet, and
// those a controller or a user made for pods the definition puts in no
// gang (a root Job under WorkloadWithJob). Each is counted over every pod
// naming it; the pods of the view naming it are given its name.
func addNativeWithoutGang(d *Description, in describeInput, used map[string]bool, podGang map[string]string) {
	if in.NativePodGroups == nil {
		return
	}
	names := map[string]bool{}
	for n := range in.NativePodGroups {
		names[n] = true
	}
	for n := range nativeNames(in.Pods) {
		names[n] = true
	}
	var order []string
	for n := range names {
		if !used[n] {
			order = append(order, n)
		}
	}
	sort.Strings(order)
	for _, n := range order {
		gang := &definition.Gang{MinMember: 1}
		if pg := in.NativePodGroups[n]; pg != nil {
			gang.Definition = pg.Definition
		}
		var pods []*corev1.Pod
		for _, p := range in.Pods {
			if nativeGroupOf(p) == n {
				pods = append(pods, p)
				podGang[p.Name] = n
			}
		}
		agg := &gangAgg{gang: gang, pods: pods, nativeNames: map[string]int{n: 1}}
		d.Gangs = append(d.Gangs, agg.view(in))
	}
}

// heldNativeGangs are the native gangs of d the scheduler holds before
// trying them: short of minCount pods, or without their PodGroup.
func heldNativeGangs(d *Description) map[string]bool {
	held := map[string]bool{}
	for _, g := range d.Gangs {
		if g.Native && (!g.PodGroupFound || int32(g.Pods) < g.MinMember) {
			held[g.Name] = true
		}
	}
	return held
}

// nativeCells are the API and MEMBERS cells of a gang in the gang table.
func nativeCells(g GangView) []cell {
	if !g.Native || g.NativePodGroup == nil {
		return []cell{plain("scheduler-plugins"), plain("-")}
	}
	api := "native"
	if g.NativePodGroup.Policy == "basic" {
		api = "native (basic)"
	}
	return []cell{plain(api), plain(g.NativePodGroup.Summary)}
}

// nativePlanName is the PodGroup name of a whole-workload gang plan: the
// native one when the workload has it (the pod-grouper in native mode
// names it with the workload's UID), else name.
func nativePlanName(in describeInput, gangDef, name string) string {
	if in.NativePodGroups == nil {
		return name
	}
	n := naming.NativePodGroupName(in.Root.GetName(), string(in.Root.GetUID()), in.Compiled.Definition(), gangDef, nil)
	if in.NativePodGroups[n] != nil {
		return n
	}
	return name
}
