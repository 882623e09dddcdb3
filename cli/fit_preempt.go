package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/plan"
	"github.com/muster-io/muster/plugins/gang/victims"
)

// preemptionLists are what the victim search reads besides the snapshot,
// listed once per cluster when the first gang does not fit now: a cluster
// where everything fits is read with the two list calls alone.
type preemptionLists struct {
	classes map[string]*schedulingv1.PriorityClass
	// defaultClass is the globalDefault class pods without a
	// priorityClassName get (nil: priority 0).
	defaultClass *schedulingv1.PriorityClass
	// classesErr: the classes could not be read; gangs whose members have
	// no spec.priority yet cannot be given a priority.
	classesErr error
	pdbs       []*policy.PodDisruptionBudget
	podGroups  map[types.NamespacedName]*unstructured.Unstructured
	warnings   []string
}

func (s *fitSnapshot) preemptionLists(ctx context.Context) *preemptionLists {
	if s.lists != nil {
		return s.lists
	}
	l := &preemptionLists{classes: map[string]*schedulingv1.PriorityClass{}, podGroups: map[types.NamespacedName]*unstructured.Unstructured{}}
	s.lists = l
	if classes, err := s.cluster.Kube.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{}); err != nil {
		l.classesErr = apiError("list priorityclasses", err)
	} else {
		for i := range classes.Items {
			pc := &classes.Items[i]
			l.classes[pc.Name] = pc
			// Several global defaults: the Priority admission plugin
			// takes the lowest value.
			if pc.GlobalDefault && (l.defaultClass == nil || pc.Value < l.defaultClass.Value) {
				l.defaultClass = pc
			}
		}
	}
	if pdbs, err := s.cluster.Kube.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); err != nil {
		l.warnings = append(l.warnings, fmt.Sprintf("PodDisruptionBudgets not read (%v): the victims are ordered as if none existed", oneLine(err.Error())))
	} else {
		for i := range pdbs.Items {
			l.pdbs = append(l.pdbs, &pdbs.Items[i])
		}
	}
	if pgs, err := listPodGroups(ctx, s.cluster, metav1.NamespaceAll); err != nil {
		l.warnings = append(l.warnings, fmt.Sprintf("PodGroups not read (%v): elastic gangs' extras and recorded gang priorities are not known to the victim search", oneLine(err.Error())))
	} else {
		for i := range pgs {
			pg := &pgs[i]
			l.podGroups[types.NamespacedName{Namespace: pg.GetNamespace(), Name: pg.GetName()}] = pg
		}
	}
	return l
}

// gangPriority is the priority and preemption policy muster-scheduler
// would give the gang: each pending member's spec.priority and
// spec.preemptionPolicy (set by the Priority admission plugin) or, for a
// member not created yet, its priorityClassName resolved as that plugin
// resolves it (no name: the globalDefault class, else 0); the highest
// member's priority is the gang's, raised to what the pod-grouper recorded
// on a live PodGroup, and one member with preemptionPolicy Never makes the
// gang never preempt.
func (l *preemptionLists) gangPriority(g *fitGang) (prio int32, class string, never bool, err error) {
	first := true
	for _, p := range g.pending {
		v, c, policy := int32(0), p.Spec.PriorityClassName, p.Spec.PreemptionPolicy
		switch {
		case p.Spec.Priority != nil:
			v = *p.Spec.Priority
		case l.classesErr != nil:
			return 0, "", false, fmt.Errorf("member %s has no priority yet and %w", p.Name, l.classesErr)
		case c == "":
			if pc := l.defaultClass; pc != nil {
				v, c = pc.Value, pc.Name
				if policy == nil {
					policy = pc.PreemptionPolicy
				}
			}
		default:
			pc, ok := l.classes[c]
			if !ok {
				return 0, "", false, fmt.Errorf("member %s: priorityClassName %q: no PriorityClass with that name (the API server would refuse the pod)", p.Name, c)
			}
			v = pc.Value
			if policy == nil {
				policy = pc.PreemptionPolicy
			}
		}
		if first || v > prio {
			prio, class, first = v, c, false
		}
		never = never || (policy != nil && *policy == corev1.PreemptNever)
	}
	if g.recorded != nil && *g.recorded > prio {
		prio, class = *g.recorded, g.recordedClass
	}
	return prio, class, never, nil
}

// preempt runs muster-scheduler's victim search for a gang that does not
// fit now, on this snapshot, with its own words when nothing is evicted.
// On success the victims (and the terminating pods the plan relies on)
// are taken off the snapshot, so the gangs placed after see the room as
// the scheduler would leave it.
func (s *fitSnapshot) preempt(ctx context.Context, g *fitGang, req plan.Request, gf *GangFit) (*plan.Plan, error) {
	l := s.preemptionLists(ctx)
	prio, class, never, err := l.gangPriority(g)
	if err != nil {
		gf.Preemption = "not evaluated: " + oneLine(err.Error())
		return nil, nil
	}
	gf.Priority, gf.PriorityClass = &prio, class
	if never {
		// The plugin's own words.
		gf.Preemption = fmt.Sprintf("gang %s: not preempting: preemptionPolicy is Never", g.key)
		return nil, nil
	}
	own := map[types.UID]bool{}
	for _, p := range g.pending {
		own[p.UID] = true
	}
	for _, p := range g.bound {
		own[p.UID] = true
	}
	in := victims.Input{
		Priority: prio,
		// Pods fit placed for earlier gangs do not exist yet.
		Own: func(p *corev1.Pod) bool { return own[p.UID] || s.added[p.UID] },
		MinMember: func(k types.NamespacedName) int {
			if pg := l.podGroups[k]; pg != nil {
				mm, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
				return int(mm)
			}
			return 0
		},
		GangPriority: func(k types.NamespacedName) (int32, bool) {
			if pg := l.podGroups[k]; pg != nil {
				return api.PodGroupPriority(pg.GetAnnotations())
			}
			return 0, false
		},
		PDBs:     l.pdbs,
		GPUNames: s.gpuNames,
	}
	if len(g.pending) > 0 {
		// The room pods nominated on a node wait for is not the gang's,
		// in the search either (as muster-scheduler's).
		req.Held, _ = plan.HoldNominated(req, g.pending[0], s.nominatedOn)
	}
	res, terminating, err := victims.Find(ctx, req, in)
	var wnf *victims.WouldNotFitError
	switch {
	case errors.As(err, &wnf):
		gf.Preemption = api.CapReason(fmt.Sprintf("gang %s: %s", g.key, wnf.Error()))
		return nil, nil
	case err != nil:
		return nil, err
	case len(res.Units) == 0:
		// Without the terminating pods it fits: the scheduler waits.
		gf.Preemption = fmt.Sprintf("gang %s: fits once %d terminating pods are gone; not preempting", g.key, terminating)
		return nil, nil
	}
	gone := map[types.UID]bool{}
	for _, p := range victims.Pods(res.Units) {
		gone[p.UID] = true
	}
	for _, ni := range s.infos {
		for _, pi := range ni.GetPods() {
			if pi.GetPod().DeletionTimestamp != nil {
				gone[pi.GetPod().UID] = true
			}
		}
	}
	logger := klog.FromContext(ctx)
	for _, ni := range s.infos {
		var drop []*corev1.Pod
		for _, pi := range ni.GetPods() {
			if gone[pi.GetPod().UID] {
				drop = append(drop, pi.GetPod())
			}
		}
		for _, p := range drop {
			if err := ni.RemovePod(logger, p); err != nil {
				return nil, fmt.Errorf("snapshot: remove victim %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
	}
	gf.Victims = victimFits(res.Units)
	return res.Plan, nil
}

// victimFits reports the units as muster fit shows them.
func victimFits(units []*victims.Unit) []VictimFit {
	out := make([]VictimFit, 0, len(units))
	for _, u := range units {
		v := VictimFit{Unit: u.Key, Kind: "gang", Namespace: u.Namespace, Name: u.Name, Pods: len(u.Pods), GPUs: u.GPUs,
			Priority: u.Priority, ViolatesPDB: u.ViolatesPDB, Nodes: []string{}}
		switch {
		case u.Extra:
			v.Kind, v.Gang, v.Name = "extra", u.Name, u.Pods[0].GetPod().Name
		case u.Kind == victims.KindPod:
			v.Kind = "pod"
		}
		switch u.Kind {
		case victims.KindGang:
			v.Mechanism = "muster"
		case victims.KindNative:
			v.Mechanism = "native"
		case victims.KindForeign:
			v.Mechanism = u.Mechanism
		}
		seen := map[string]bool{}
		for _, pi := range u.Pods {
			if n := pi.GetPod().Spec.NodeName; !seen[n] {
				seen[n] = true
				v.Nodes = append(v.Nodes, n)
			}
		}
		sort.Strings(v.Nodes)
		out = append(out, v)
	}
	return out
}

// VictimFit is one unit muster-scheduler would evict, whole, for a gang
// that fits only after preempting.
type VictimFit struct {
	// Unit names it as muster-scheduler's Preempting event does: "gang
	// ns/name", "pod ns/name", "extra ns/pod of gang ns/name", "native
	// PodGroup ns/name", "Volcano gang ns/name".
	Unit string `json:"unit"`
	// Kind: "gang" (every bound pod of the gang), "pod" (a pod in no gang)
	// or "extra" (one member of an elastic muster gang above its quorum).
	Kind string `json:"kind"`
	// Mechanism of a gang or extra: "muster", "native", "Volcano", "KAI".
	Mechanism string `json:"mechanism,omitempty"`
	Namespace string `json:"namespace"`
	// Name is the gang's or the pod's; for an extra the pod's, with its
	// gang in Gang.
	Name     string   `json:"name"`
	Gang     string   `json:"gang,omitempty"`
	Pods     int      `json:"pods"`
	GPUs     int64    `json:"gpus"`
	Priority int32    `json:"priority"`
	Nodes    []string `json:"nodes"`
	// ViolatesPDB: evicting it takes a pod below its PodDisruptionBudget
	// (chosen only when nothing else lets the gang fit).
	ViolatesPDB bool `json:"violatesPDB,omitempty"`
}
