package dashboard

import (
	"cmp"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/kubectl/pkg/util/podutils"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition"
)

// Snapshot is what the page draws: the GPU map and the gangs, in one
// document small enough for 1000 nodes × 8 GPUs and 10 000 pods (short
// keys, cells as indexes into Pods rather than repeated names).
type Snapshot struct {
	Version int64     `json:"version"`
	Time    time.Time `json:"time"`
	// Levels are the node label keys the map groups nodes by, outermost
	// first.
	Levels    []string       `json:"levels"`
	Totals    Totals         `json:"totals"`
	Nodes     []NodeView     `json:"nodes"`
	Pods      []PodRef       `json:"pods"`
	Workloads []WorkloadView `json:"workloads"`
}

// Totals are the figures above the map, in GPUs.
type Totals struct {
	Capacity  int64 `json:"capacity"`
	Allocated int64 `json:"allocated"`
	Free      int64 `json:"free"`
	// IdlePartial are the free GPUs of nodes that hold at least one:
	// fragmentation, the room no whole-node gang member can use.
	IdlePartial int64 `json:"idlePartial"`
	// Waiting is the GPUs pending pods request.
	Waiting int64 `json:"waiting"`
}

// NodeView is one node's strip of GPU cells.
type NodeView struct {
	Name string `json:"n"`
	// Domains are the node's values of Snapshot.Levels ("" where unset).
	Domains []string `json:"d"`
	// Cells has one entry per allocatable GPU: the index in Snapshot.Pods
	// of the pod holding it, -1 for free. Nominated cells are those of
	// pods waiting with this node nominated (Snapshot.Pods[i].Nominated).
	Cells []int `json:"c"`
	// Cordoned: unschedulable; Tainted: any NoSchedule or NoExecute taint
	// (pods that tolerate it may still land there).
	Cordoned bool `json:"u,omitempty"`
	Tainted  bool `json:"t,omitempty"`
}

// PodRef names a pod a cell points at.
type PodRef struct {
	Namespace string `json:"ns"`
	Name      string `json:"n"`
	// Workload is the index in Snapshot.Workloads of the pod's gang's
	// workload, -1 for a pod outside any gang.
	Workload int `json:"w"`
	// Gang is the pod's PodGroup; Owner its controller ("Job/x"); Role
	// the component (and instance) of the workload's definition the pod
	// plays, as describe names it ("worker/gpu"), "" when unknown.
	Gang      string `json:"g,omitempty"`
	Owner     string `json:"o,omitempty"`
	Role      string `json:"r,omitempty"`
	Nominated bool   `json:"nom,omitempty"`
}

// WorkloadView is one row of the gangs table: a workload with at least one
// PodGroup, summed over them.
type WorkloadView struct {
	Kind       string    `json:"kind"`
	APIVersion string    `json:"apiVersion"`
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	Gangs      int       `json:"gangs"`
	MinMember  int32     `json:"minMember"`
	Pods       int       `json:"pods"`
	Scheduled  int       `json:"scheduled"`
	Ready      int       `json:"ready"`
	GPUs       int64     `json:"gpus"`
	Created    time.Time `json:"created"`
	Age        string    `json:"age"`
	// State is running, waiting, queued (behind an admission queue),
	// partly-bound, evicted or done.
	State string `json:"state"`
	// Reason is why it waits, in the scheduler's words (the PodScheduled
	// condition of one of its pending pods), or the admission queue's
	// when it waits there (state queued).
	Reason string `json:"reason,omitempty"`
	// Queue is the admission queue's state of the workload (Kueue's:
	// Pending, Admitted, Evicted, ...), "" when no queue holds it;
	// QueueSummary its line; Queued that it is not admitted yet.
	Queue        string `json:"queue,omitempty"`
	QueueSummary string `json:"queueSummary,omitempty"`
	Queued       bool   `json:"-"`
}

// Inputs are the objects a snapshot is made of, as the informers hold them.
type Inputs struct {
	Nodes     []*corev1.Node
	Pods      []*corev1.Pod
	PodGroups []*schedv1alpha1.PodGroup
	// NativePodGroups are Kubernetes' own (scheduling.k8s.io/v1beta1).
	NativePodGroups []*schedv1beta1.PodGroup
	// ResourceSlices and ResourceClaims give the GPUs handed out through
	// DRA (dra.go).
	ResourceSlices []*resourcev1.ResourceSlice
	ResourceClaims []*resourcev1.ResourceClaim
	// GPUResources are the resource names counted as GPUs.
	GPUResources []corev1.ResourceName
	Levels       []string
	Now          time.Time
	// Queue are the admission queue's entries (queue.go).
	Queue []QueueEntry
	// Role, if set, names the role of a gang member that holds GPUs, given
	// the definition its PodGroup names (api.LabelDefinition; "" without
	// one); "" leaves it out.
	Role func(pod *corev1.Pod, definition string) string
}

// workloadKey identifies a workload by its PodGroups' owner.
type workloadKey struct{ apiVersion, kind, namespace, name string }

// gangOf is a PodGroup of either API as Build counts it.
type gangOf struct {
	key        string // namespace/name; nativeKey for a native one
	owner      workloadKey
	minMember  int32
	created    time.Time
	definition string
}

// nativeKey keys a native PodGroup apart from a scheduler-plugins one of
// the same name (":" is in no object name).
func nativeKey(namespace, name string) string { return "native:" + namespace + "/" + name }

// gangsOf lists the gangs of in, sorted by namespace and name. A
// scheduler-plugins PodGroup's workload is its controller; a native one's
// its controller too (the Job controller's), else the owner its
// workload-uid label names (the pod-grouper's, which is no controller
// reference), else its first owner. A native PodGroup of the basic policy
// is no gang: its pods are placed one by one.
func gangsOf(in Inputs) []gangOf {
	var out []gangOf
	for _, pg := range in.PodGroups {
		g := gangOf{key: pg.Namespace + "/" + pg.Name, minMember: pg.Spec.MinMember, created: pg.CreationTimestamp.Time, definition: pg.Labels[api.LabelDefinition],
			owner: workloadKey{"scheduling.x-k8s.io/v1alpha1", "PodGroup", pg.Namespace, pg.Name}}
		if ref := metav1.GetControllerOfNoCopy(pg); ref != nil {
			g.owner = workloadKey{ref.APIVersion, ref.Kind, pg.Namespace, ref.Name}
		}
		out = append(out, g)
	}
	for _, pg := range in.NativePodGroups {
		gang := pg.Spec.SchedulingPolicy.Gang
		if gang == nil {
			continue
		}
		g := gangOf{key: nativeKey(pg.Namespace, pg.Name), minMember: max(gang.MinCount, 1), created: pg.CreationTimestamp.Time, definition: pg.Labels[api.LabelDefinition],
			owner: workloadKey{"scheduling.k8s.io/v1beta1", "PodGroup", pg.Namespace, pg.Name}}
		refs := pg.OwnerReferences
		if ref := metav1.GetControllerOfNoCopy(pg); ref != nil {
			refs = []metav1.OwnerReference{*ref}
		} else if i := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return string(r.UID) == pg.Labels[api.LabelWorkloadUID] }); i >= 0 {
			refs = refs[i : i+1]
		}
		if len(refs) > 0 {
			g.owner = workloadKey{refs[0].APIVersion, refs[0].Kind, pg.Namespace, refs[0].Name}
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b gangOf) int { return cmp.Compare(a.key, b.key) })
	return out
}

// Build makes the snapshot of in. It is a pure function of its inputs.
func Build(in Inputs) *Snapshot {
	s := &Snapshot{Time: in.Now, Levels: in.Levels, Nodes: []NodeView{}, Pods: []PodRef{}, Workloads: []WorkloadView{}}

	// Workloads from PodGroups of both APIs; a PodGroup without an owner
	// is its own workload (a gang made by hand).
	wlIndex := map[workloadKey]int{}
	pgWorkload := map[string]int{}      // gang key → workload index
	pgDefinition := map[string]string{} // gang key → definition
	for _, g := range gangsOf(in) {
		pgDefinition[g.key] = g.definition
		i, ok := wlIndex[g.owner]
		if !ok {
			i = len(s.Workloads)
			wlIndex[g.owner] = i
			s.Workloads = append(s.Workloads, WorkloadView{Kind: g.owner.kind, APIVersion: g.owner.apiVersion, Namespace: g.owner.namespace, Name: g.owner.name, Created: g.created})
		}
		w := &s.Workloads[i]
		w.Gangs++
		w.MinMember += g.minMember
		if g.created.Before(w.Created) {
			w.Created = g.created
		}
		pgWorkload[g.key] = i
	}

	dra := newDRAView(in)

	// Pods: each GPU pod on a node or nominated to one gets a PodRef.
	nodeCells := map[string][]int{}
	nominated := map[string][]int{}
	pending := map[int][]*corev1.Pod{} // workload → its pending pods
	evicted := map[int]string{}        // workload → why its pods are being evicted
	pods := slices.Clone(in.Pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, p := range pods {
		terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		wi, gang, gangKey := -1, "", ""
		// The scheduler follows spec.schedulingGroup before any label.
		if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
			if i, ok := pgWorkload[nativeKey(p.Namespace, *sg.PodGroupName)]; ok {
				wi, gang, gangKey = i, *sg.PodGroupName, nativeKey(p.Namespace, *sg.PodGroupName)
			}
		}
		if g := p.Labels[api.LabelPodGroup]; wi < 0 && g != "" {
			if i, ok := pgWorkload[p.Namespace+"/"+g]; ok {
				wi, gang, gangKey = i, g, p.Namespace+"/"+g
			}
		}
		// A GPU asked for as an extended resource that DRA backs is both
		// the request and a device: the larger is the pod's, never both.
		gpus := max(definition.GPUs(definition.PodRequests(&p.Spec), in.GPUResources), dra.podGPUs(p))
		if wi >= 0 && !terminal {
			w := &s.Workloads[wi]
			w.Pods++
			if msg, ok := disruption(p); ok && evicted[wi] == "" {
				evicted[wi] = msg
			}
			if p.Spec.NodeName != "" {
				w.Scheduled++
				w.GPUs += gpus
				if podutils.IsPodReady(p) {
					w.Ready++
				}
			} else {
				pending[wi] = append(pending[wi], p)
			}
		}
		if terminal || gpus == 0 {
			continue
		}
		node := p.Spec.NodeName
		nom := false
		if node == "" {
			s.Totals.Waiting += gpus
			if node = p.Status.NominatedNodeName; node == "" {
				continue
			}
			nom = true
		}
		ref := PodRef{Namespace: p.Namespace, Name: p.Name, Workload: wi, Gang: gang, Nominated: nom}
		if c := controllerOf(p); c != "" {
			ref.Owner = c
		}
		if wi >= 0 && in.Role != nil {
			ref.Role = in.Role(p, pgDefinition[gangKey])
		}
		idx := len(s.Pods)
		s.Pods = append(s.Pods, ref)
		for range gpus {
			if nom {
				nominated[node] = append(nominated[node], idx)
			} else {
				nodeCells[node] = append(nodeCells[node], idx)
			}
		}
	}

	nodes := slices.Clone(in.Nodes)
	sort.Slice(nodes, func(a, b int) bool { return nodes[a].Name < nodes[b].Name })
	for _, n := range nodes {
		capacity := definition.GPUs(n.Status.Allocatable, in.GPUResources) + dra.capacity[n.Name]
		if capacity == 0 {
			continue
		}
		nv := NodeView{Name: n.Name, Domains: make([]string, len(in.Levels)), Cordoned: n.Spec.Unschedulable, Tainted: blockingTaint(n)}
		for i, l := range in.Levels {
			nv.Domains[i] = n.Labels[l]
		}
		held := nodeCells[n.Name]
		// Bound pods first, then the nominated, then free; more held than
		// allocatable (a stale cache) is shown as held, never dropped.
		cells := append(slices.Clone(held), nominated[n.Name]...)
		for int64(len(cells)) < capacity {
			cells = append(cells, -1)
		}
		nv.Cells = cells
		s.Totals.Capacity += capacity
		s.Totals.Allocated += int64(len(held))
		if free := capacity - int64(len(held)); free > 0 {
			s.Totals.Free += free
			if len(held) > 0 {
				s.Totals.IdlePartial += free
			}
		}
		s.Nodes = append(s.Nodes, nv)
	}
	slices.SortStableFunc(s.Nodes, func(a, b NodeView) int {
		return slices.Compare(a.Domains, b.Domains)
	})

	applyQueue(s, in.Queue, wlIndex)
	for i := range s.Workloads {
		w := &s.Workloads[i]
		if w.Created.IsZero() {
			w.Age = ""
		} else {
			w.Age = duration.HumanDuration(in.Now.Sub(w.Created))
		}
		w.State = workloadState(w)
		if w.Queued && w.Scheduled == 0 {
			// Behind the queue, not the scheduler: its words, not a
			// pending pod's (a queue that gates pods has them pending).
			w.State, w.Reason = "queued", w.QueueSummary
			continue
		}
		if ps := pending[i]; len(ps) > 0 {
			w.Reason = pendingReason(ps)
		}
		if msg, ok := evicted[i]; ok && w.State != "done" {
			w.State, w.Reason = "evicted", msg
		}
	}
	return s
}

// workloadState is the gangs table's state of w.
func workloadState(w *WorkloadView) string {
	switch {
	case w.Pods == 0:
		return "done"
	case w.Scheduled == 0:
		return "waiting"
	case int32(w.Scheduled) < w.MinMember:
		return "partly-bound"
	default:
		return "running"
	}
}

// pendingReason is the scheduler's message on the first pending pod that
// has one, else the pods' own waiting state.
func pendingReason(pods []*corev1.Pod) string {
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				return c.Message
			}
		}
	}
	for _, p := range pods {
		if len(p.Spec.SchedulingGates) > 0 {
			return "scheduling gated by " + p.Spec.SchedulingGates[0].Name
		}
	}
	return "not yet tried by a scheduler"
}

// disruption says why p is being evicted: its DisruptionTarget condition,
// set by whoever evicts it (the scheduler's preemption, muster's included;
// the eviction API; the taint manager; Kueue), before the pod goes.
func disruption(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			msg := "evicted (" + c.Reason + ")"
			if c.Message != "" {
				msg += ": " + c.Message
			}
			return msg, true
		}
	}
	return "", false
}

func controllerOf(p *corev1.Pod) string {
	for _, ref := range p.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.Kind + "/" + ref.Name
		}
	}
	return ""
}

func blockingTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}
