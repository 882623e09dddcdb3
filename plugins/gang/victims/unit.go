package victims

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/muster-io/muster/api"
)

// Unit is what the victim search takes or leaves as a whole: the bound
// pods of one gang cluster-wide (a muster PodGroup, a native PodGroup,
// another mechanism's gang), one pod that belongs to no gang, or one member
// of an elastic muster gang above its quorum (an "extra": taking it leaves
// the gang whole).
type Unit struct {
	// Key names the unit in messages: "gang ns/name", "pod ns/name", ...
	Key string
	// Kind is what the unit's pods belong to; an extra has KindGang.
	Kind Kind
	// Namespace and Name name the gang (for an extra: its gang) or the
	// lone pod.
	Namespace, Name string
	// Mechanism is the other gang mechanism of a KindForeign unit
	// ("Volcano", "KAI").
	Mechanism string
	// BreaksGang: evicting the unit breaks a gang (every gang unit; not an
	// extra, not a lone pod).
	BreaksGang bool
	Extra      bool
	// Gang is the muster PodGroup of a muster gang unit or an extra.
	Gang     types.NamespacedName
	Priority int32
	Pods     []fwk.PodInfo
	GPUs     int64
	// Started is the unit's earliest pod start: the youngest unit has the
	// latest one.
	Started time.Time
	// ViolatesPDB: evicting the unit takes some pod below its budget.
	ViolatesPDB bool
}

// Kind is what a bound pod belongs to, for grouping into units.
type Kind int

const (
	// KindPod is a pod in no gang.
	KindPod Kind = iota
	// KindGang is a muster gang (a scheduler-plugins PodGroup).
	KindGang
	// KindNative is a native Kubernetes PodGroup (spec.schedulingGroup).
	KindNative
	// KindForeign is another mechanism's gang (Volcano, KAI).
	KindForeign
)

// unitOf says which unit a bound pod belongs to: its kind, the key that
// groups it (namespace and name, so one key collects a gang's pods on every
// node), the gang's or pod's name and the foreign mechanism.
func unitOf(pod *v1.Pod) (kind Kind, key, name, mechanism string) {
	switch {
	case pod.Spec.SchedulingGroup != nil && pod.Spec.SchedulingGroup.PodGroupName != nil:
		name = *pod.Spec.SchedulingGroup.PodGroupName
		return KindNative, fmt.Sprintf("native PodGroup %s/%s", pod.Namespace, name), name, ""
	case pod.Spec.SchedulingGroup == nil && pod.Labels[api.LabelPodGroup] != "":
		name = pod.Labels[api.LabelPodGroup]
		return KindGang, fmt.Sprintf("gang %s/%s", pod.Namespace, name), name, ""
	}
	if f, ok := api.ForeignGangOf(pod.Annotations); ok {
		return KindForeign, fmt.Sprintf("%s gang %s/%s", f.Mechanism, pod.Namespace, f.Group), f.Group, f.Mechanism
	}
	return KindPod, fmt.Sprintf("pod %s/%s", pod.Namespace, pod.Name), pod.Name, ""
}

// Input is what the victim search reads: the snapshot and how to tell
// the preemptor's own pods and an elastic gang's quorum.
type Input struct {
	Nodes []fwk.NodeInfo
	// Priority of the preemptor: only units of strictly lower priority are
	// victims.
	Priority int32
	// Own reports the preemptor's own pods (never victims).
	Own func(*v1.Pod) bool
	// MinMember is the quorum of a muster gang, 0 when unknown (then the
	// gang has no extras).
	MinMember func(types.NamespacedName) int
	// GangPriority is the priority the pod-grouper recorded on a muster
	// gang's PodGroup (its highest member's, pending ones included); nil
	// or !ok: the bound members' priorities alone decide.
	GangPriority func(types.NamespacedName) (int32, bool)
	PDBs         []*policy.PodDisruptionBudget
	GPUNames     []v1.ResourceName
}

// Build groups the snapshot's bound pods into victim units and keeps
// those of strictly lower priority than the preemptor. A gang with any pod
// of the preemptor's priority or higher is no victim at all: it cannot be
// taken whole. Pods already being deleted are left out: they free their room
// without help.
func Build(in Input) []*Unit {
	// Gangs of one priority waiting for room is the common case, and then
	// no pod is a victim. Grouping every bound pod to find that out was
	// most of the scheduler's CPU with 1251 such gangs waiting at 50 000
	// pods (BENCHMARKS.md, issue 18, session 7); this pass allocates
	// nothing.
	if !anyLowerPriority(in) {
		return nil
	}
	type group struct {
		kind            Kind
		name, mechanism string
		pods            []fwk.PodInfo
		prio            int32
	}
	groups := map[string]*group{}
	var order []string
	for _, ni := range in.Nodes {
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if !in.candidate(pod) {
				continue
			}
			kind, key, name, mechanism := unitOf(pod)
			g, ok := groups[key]
			if !ok {
				g = &group{kind: kind, name: name, mechanism: mechanism, prio: corev1helpers.PodPriority(pod)}
				groups[key] = g
				order = append(order, key)
			}
			g.pods = append(g.pods, pi)
			g.prio = max(g.prio, corev1helpers.PodPriority(pod))
		}
	}
	var units []*Unit
	for _, key := range order {
		g := groups[key]
		var gang types.NamespacedName
		ns := g.pods[0].GetPod().Namespace
		if g.kind == KindGang {
			gang = types.NamespacedName{Namespace: ns, Name: g.name}
			if in.GangPriority != nil {
				if prio, ok := in.GangPriority(gang); ok {
					g.prio = max(g.prio, prio)
				}
			}
		}
		if g.prio >= in.Priority {
			continue
		}
		u := in.newUnit(key, g.pods, g.prio, g.kind != KindPod)
		u.Kind, u.Namespace, u.Name, u.Mechanism = g.kind, ns, g.name, g.mechanism
		if g.kind == KindGang {
			u.Gang = gang
			units = append(units, in.extras(u)...)
		}
		units = append(units, u)
	}
	markPDBViolations(units, in.PDBs)
	return units
}

// anyLowerPriority reports whether a pod Build would group has a priority
// below the preemptor's. A unit's priority is at least each of its pods',
// so without such a pod Build keeps no unit.
func anyLowerPriority(in Input) bool {
	for _, ni := range in.Nodes {
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if in.candidate(pod) && corev1helpers.PodPriority(pod) < in.Priority {
				return true
			}
		}
	}
	return false
}

// candidate reports whether Build groups pod: not being deleted already
// and not the preemptor's own.
func (in Input) candidate(pod *v1.Pod) bool {
	return pod.DeletionTimestamp == nil && (in.Own == nil || !in.Own(pod))
}

// extras are the bound members of an elastic gang above its quorum, the
// youngest first, each a unit of its own.
func (in Input) extras(u *Unit) []*Unit {
	if in.MinMember == nil {
		return nil
	}
	quorum := in.MinMember(u.Gang)
	if quorum <= 0 || len(u.Pods) <= quorum {
		return nil
	}
	pods := append([]fwk.PodInfo(nil), u.Pods...)
	sort.SliceStable(pods, func(i, j int) bool { return startOf(pods[i].GetPod()).After(startOf(pods[j].GetPod())) })
	var out []*Unit
	for _, pi := range pods[:len(pods)-quorum] {
		x := in.newUnit(fmt.Sprintf("extra %s/%s of %s", pi.GetPod().Namespace, pi.GetPod().Name, u.Key), []fwk.PodInfo{pi}, u.Priority, false)
		x.Kind, x.Namespace, x.Name = KindGang, u.Namespace, u.Name
		x.Extra, x.Gang = true, u.Gang
		out = append(out, x)
	}
	return out
}

func (in Input) newUnit(key string, pods []fwk.PodInfo, prio int32, gang bool) *Unit {
	u := &Unit{Key: key, BreaksGang: gang, Priority: prio, Pods: pods}
	for _, pi := range pods {
		r := pi.CalculateResource().Resource
		for _, name := range in.GPUNames {
			if r != nil {
				u.GPUs += r.GetScalarResources()[name]
			}
		}
		if t := startOf(pi.GetPod()); u.Started.IsZero() || t.Before(u.Started) {
			u.Started = t
		}
	}
	return u
}

func startOf(pod *v1.Pod) time.Time {
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}

// markPDBViolations uses DefaultPreemption's own PDB accounting: a unit
// violates if taking all its pods takes some pod below its budget.
func markPDBViolations(units []*Unit, pdbs []*policy.PodDisruptionBudget) {
	if len(pdbs) == 0 {
		return
	}
	var vs []preemption.Victim
	byVictim := map[preemption.Victim]*Unit{}
	for _, u := range units {
		v, err := preemption.NewVictim(u.Pods, u.Priority, fwk.PodKeyType)
		if err != nil {
			continue
		}
		vs = append(vs, v)
		byVictim[v] = u
	}
	violating, _ := preemption.FilterVictimsWithPDBViolation(vs, pdbs)
	for _, v := range violating {
		byVictim[v.Victim].ViolatesPDB = true
	}
}

// Cheaper is the documented victim order, cheapest first:
//  1. no PodDisruptionBudget violated (as DefaultPreemption prefers);
//  2. no gang broken: an elastic gang's extras and lone pods before gangs;
//  3. lower priority (a gang's priority is its highest member's);
//  4. fewer pods, then fewer GPUs;
//  5. younger (started later);
//  6. the key, so the order is total and the search deterministic.
func Cheaper(a, b *Unit) bool {
	if a.ViolatesPDB != b.ViolatesPDB {
		return !a.ViolatesPDB
	}
	if a.BreaksGang != b.BreaksGang {
		return !a.BreaksGang
	}
	if a.Extra != b.Extra {
		return a.Extra
	}
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if len(a.Pods) != len(b.Pods) {
		return len(a.Pods) < len(b.Pods)
	}
	if a.GPUs != b.GPUs {
		return a.GPUs < b.GPUs
	}
	if !a.Started.Equal(b.Started) {
		return a.Started.After(b.Started)
	}
	return a.Key < b.Key
}
