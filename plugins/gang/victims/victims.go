package victims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/plan"
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

// FitFunc plans the preemptor on the snapshot with the given pods removed.
type FitFunc func(ctx context.Context, removed map[types.UID]bool) (*plan.Plan, error)

// Result is the victim set the search chose and the plan it allows.
type Result struct {
	Units []*Unit
	Plan  *plan.Plan
	// Plans counts the plans computed (the search's cost).
	Plans int
}

// WouldNotFitError: even with every eligible victim gone the preemptor has
// no placement; nothing is evicted.
type WouldNotFitError struct {
	// Victims counts the lower-priority pods evicting all of which would
	// not help.
	Victims int
	// Reason is the planner's reason with every victim gone.
	Reason string
	// Who is "the gang" (when empty) or "the pod".
	Who string
}

func (e *WouldNotFitError) Error() string {
	// A pod alone gets no planner reason: the framework's filter reasons
	// already say why it does not fit, in the words people know.
	if e.Victims == 0 {
		// The reason is the one PreFilter gave already.
		return "preemption would not help: no running pod has a lower priority"
	}
	reason := " (then: " + e.Reason + ")"
	if e.Who == "the pod" {
		reason = ""
	}
	who := e.Who
	if who == "" {
		who = "the gang"
	}
	return fmt.Sprintf("preemption would not help: %s would not fit even after evicting all %d lower-priority pods%s", who, e.Victims, reason)
}

// Search finds a set of whole units whose eviction lets the
// preemptor's quorum fit by the plan, and takes it only then:
//
//  1. sort the units cheapest first (Cheaper);
//  2. find the shortest cheapest-first prefix that lets the plan fit:
//     start from the shortest prefix that frees enough resources in total
//     (Shortfall), double it until the plan fits, then bisect. If even the
//     whole list does not fit: WouldNotFitError, nothing is evicted;
//  3. try to give back each unit of that prefix, most expensive first
//     (like DefaultPreemption's reprieve), keeping it only if the plan then
//     no longer fits.
//
// The result is minimal (no unit in it can be spared) and biased to the
// cheapest units. It costs about 2·log2(prefix) + |prefix| plans, each on
// the snapshot with only the prefix's nodes copied.
func Search(ctx context.Context, units []*Unit, fit FitFunc, short Shortfall) (*Result, error) {
	sorted := append([]*Unit(nil), units...)
	sort.SliceStable(sorted, func(i, j int) bool { return Cheaper(sorted[i], sorted[j]) })
	res, err := searchOrder(ctx, sorted, fit, short)
	if err != nil || len(res.Units) == 0 {
		return res, err
	}
	// The global order knows nothing of where the room is needed: cheap
	// units on many nodes come before a gang on the right one. Try again
	// with the units on one of the nodes the plan chose first (the first
	// few of them), and keep the cheapest set found. On small random
	// clusters this takes the share of exactly cheapest sets from 46% to
	// 55% (TestSearchVictimsAgainstExhaustive) for about twice the plans.
	var planNodes []string
	for _, n := range res.Plan.Assignments {
		if !slices.Contains(planNodes, n) {
			planNodes = append(planNodes, n)
		}
	}
	sort.Strings(planNodes)
	for _, n := range planNodes[:min(len(planNodes), maxFocusNodes)] {
		ordered := focusOrder(sorted, []string{n})
		alt, err := searchOrder(ctx, ordered, fit, short)
		if err != nil {
			return nil, err
		}
		res.Plans += alt.Plans
		if costLess(costOf(alt.Units), costOf(res.Units)) {
			res.Units, res.Plan = alt.Units, alt.Plan
		}
	}
	return res, nil
}

// maxFocusNodes bounds the node-focused retries of the search.
const maxFocusNodes = 2

// focusOrder puts the units with a pod on one of nodes first, each part
// still cheapest first.
func focusOrder(sorted []*Unit, nodes []string) []*Unit {
	on := func(u *Unit) bool {
		for _, pi := range u.Pods {
			if slices.Contains(nodes, pi.GetPod().Spec.NodeName) {
				return true
			}
		}
		return false
	}
	out := make([]*Unit, 0, len(sorted))
	for _, u := range sorted {
		if on(u) {
			out = append(out, u)
		}
	}
	for _, u := range sorted {
		if !on(u) {
			out = append(out, u)
		}
	}
	return out
}

// cost is the documented order applied to a whole set: PDB-violating
// units, gangs broken, the highest priority taken, pods, GPUs.
type cost [5]int64

func costOf(units []*Unit) cost {
	var c cost
	pods := map[types.UID]bool{}
	for _, u := range units {
		if u.ViolatesPDB {
			c[0]++
		}
		if u.BreaksGang {
			c[1]++
		}
		c[2] = max(c[2], int64(u.Priority))
		for _, pi := range u.Pods {
			if !pods[pi.GetPod().UID] {
				pods[pi.GetPod().UID] = true
				c[3]++
			}
		}
		c[4] += u.GPUs
	}
	return c
}

func costLess(a, b cost) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// searchOrder is the search on one order of the units: the shortest
// fitting prefix, then the reprieve.
func searchOrder(ctx context.Context, sorted []*Unit, fit FitFunc, short Shortfall) (*Result, error) {
	res := &Result{}
	try := func(set []*Unit) (*plan.Plan, error) {
		res.Plans++
		removed := map[types.UID]bool{}
		for _, u := range set {
			for _, pi := range u.Pods {
				removed[pi.GetPod().UID] = true
			}
		}
		return fit(ctx, removed)
	}
	pods := map[types.UID]bool{}
	for _, u := range sorted {
		for _, pi := range u.Pods {
			pods[pi.GetPod().UID] = true
		}
	}
	// Galloping from the resource lower bound: a prefix shorter than
	// that cannot fit, and trying the whole list first would copy every
	// node the victims run on.
	// Prefixes shorter than lo are known not to fit; the one of length hi
	// fits.
	lb := short.prefix(sorted)
	lo, hi := lb, -1
	var best *plan.Plan
	for k := max(lb, 1); ; k *= 2 {
		k = min(k, len(sorted))
		p, err := try(sorted[:k])
		if err == nil {
			hi, best = k, p
			break
		}
		if !isNoPlacement(err) {
			return nil, err
		}
		lo = k + 1
		if k == len(sorted) {
			return nil, notFit(err, len(pods))
		}
	}
	for lo < hi {
		mid := (lo + hi) / 2
		p, err := try(sorted[:mid])
		if err == nil {
			hi, best = mid, p
			continue
		}
		if !isNoPlacement(err) {
			return nil, err
		}
		lo = mid + 1
	}
	chosen := append([]*Unit(nil), sorted[:hi]...)
	// The last unit of the prefix is needed (a shorter prefix failed);
	// each earlier one may be spared now that later ones are in.
	for i := len(chosen) - 2; i >= 0; i-- {
		rest := append(append([]*Unit(nil), chosen[:i]...), chosen[i+1:]...)
		p, err := try(rest)
		if err == nil {
			chosen, best = rest, p
			continue
		}
		if !isNoPlacement(err) {
			return nil, err
		}
	}
	res.Units, res.Plan = chosen, best
	return res, nil
}

// Shortfall is how much of each resource the preemptor lacks on the whole
// snapshot: its pending members' requests less what is free in total. No
// victim set freeing less can let it fit, whatever the placement.
type Shortfall map[v1.ResourceName]int64

// NewShortfall compares the pending members' requests with the free room
// of the nodes (what others' plans hold is ignored: the bound stays low).
func NewShortfall(pending []*v1.Pod, nodes []fwk.NodeInfo) Shortfall {
	need := Shortfall{}
	for _, pod := range pending {
		addResources(need, framework.NewResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})), 1)
	}
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		alloc, used := ni.GetAllocatable(), ni.GetRequested()
		for name := range need {
			need[name] -= max(plan.Amount(alloc, name)-plan.Amount(used, name), 0)
		}
	}
	return need
}

// prefix is the length of the shortest prefix of units that frees at least
// the Shortfall of every resource (len(units) when none does: the search
// then finds out that nothing fits).
func (s Shortfall) prefix(units []*Unit) int {
	left := Shortfall{}
	for name, v := range s {
		if v > 0 {
			left[name] = v
		}
	}
	for i, u := range units {
		if len(left) == 0 {
			return i
		}
		for _, pi := range u.Pods {
			addResources(left, pi.CalculateResource().Resource, -1)
		}
		for name, v := range left {
			if v <= 0 {
				delete(left, name)
			}
		}
	}
	return len(units)
}

// addResources adds sign times r to m, for the resources m tracks (all of
// r's when sign is positive).
func addResources(m Shortfall, r fwk.Resource, sign int64) {
	if r == nil {
		return
	}
	add := func(name v1.ResourceName, v int64) {
		if _, ok := m[name]; ok || sign > 0 {
			if v != 0 || ok {
				m[name] += sign * v
			}
		}
	}
	add(v1.ResourceCPU, r.GetMilliCPU())
	add(v1.ResourceMemory, r.GetMemory())
	for name, v := range r.GetScalarResources() {
		add(name, v)
	}
}

func isNoPlacement(err error) bool {
	var np *plan.NoPlacementError
	return errors.As(err, &np)
}

func notFit(err error, victims int) error {
	var np *plan.NoPlacementError
	if !errors.As(err, &np) {
		return err
	}
	return &WouldNotFitError{Victims: victims, Reason: strings.TrimPrefix(np.Message, "gang "+np.Gang+": ")}
}

// RemoveFromNodes returns the snapshot with the removed pods taken off their
// nodes; only the nodes that change are copied.
func RemoveFromNodes(logger klog.Logger, nodes []fwk.NodeInfo, removed map[types.UID]bool) []fwk.NodeInfo {
	if len(removed) == 0 {
		return nodes
	}
	out := make([]fwk.NodeInfo, len(nodes))
	for i, ni := range nodes {
		out[i] = ni
		var drop []*v1.Pod
		for _, pi := range ni.GetPods() {
			if removed[pi.GetPod().UID] {
				drop = append(drop, pi.GetPod())
			}
		}
		if len(drop) == 0 {
			continue
		}
		clone := ni.Snapshot()
		for _, pod := range drop {
			if err := clone.RemovePod(logger, pod); err != nil {
				logger.V(4).Info("Removing a victim from a node copy", "pod", klog.KObj(pod), "err", err)
			}
		}
		out[i] = clone
	}
	return out
}

// Describe names the units for events and messages, capped.
func Describe(units []*Unit) string {
	names := make([]string, 0, len(units))
	for _, u := range units {
		names = append(names, fmt.Sprintf("%s (priority %d, %d pods)", u.Key, u.Priority, len(u.Pods)))
	}
	return api.CapReason(strings.Join(names, ", "))
}

// Find runs the victim search for a preemptor whose pending members and
// snapshot are req, with the units in's lookups make (in.Nodes defaults to
// req.Nodes). Pods already being deleted (earlier victims, or anything
// else terminating) count as gone: room they free is not paid for twice
// with new victims. It returns how many such pods the result relies on.
// A result without units means the preemptor fits without eviction (once
// the terminating pods are gone, when there are any).
func Find(ctx context.Context, req plan.Request, in Input) (*Result, int, error) {
	logger := klog.FromContext(ctx)
	terminating := map[types.UID]bool{}
	for _, ni := range req.Nodes {
		for _, pi := range ni.GetPods() {
			if pi.GetPod().DeletionTimestamp != nil {
				terminating[pi.GetPod().UID] = true
			}
		}
	}
	if in.Nodes == nil {
		in.Nodes = req.Nodes
	}
	base := RemoveFromNodes(logger, req.Nodes, terminating)
	res, err := Search(ctx, Build(in), func(ctx context.Context, removed map[types.UID]bool) (*plan.Plan, error) {
		r := req
		r.Nodes = RemoveFromNodes(logger, base, removed)
		return plan.Compute(ctx, r)
	}, NewShortfall(req.Pending, base))
	return res, len(terminating), err
}

// Pods are the units' pods, each once.
func Pods(units []*Unit) []*v1.Pod {
	seen := map[types.UID]bool{}
	var out []*v1.Pod
	for _, u := range units {
		for _, pi := range u.Pods {
			if pod := pi.GetPod(); !seen[pod.UID] {
				seen[pod.UID] = true
				out = append(out, pod)
			}
		}
	}
	return out
}
