package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/kubectl/pkg/util/podutils"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
)

// defRef says which definition describes a workload and where it is from.
type defRef struct {
	Name, Origin, Source string
}

func entryRef(ent *catalog.Entry) defRef {
	return defRef{Name: ent.Name, Origin: string(ent.Origin), Source: ent.Source}
}

// podGroupInfo is what describe reads from a PodGroup.
type podGroupInfo struct {
	Name         string
	MinMember    int32
	MinResources map[string]string
	Phase        string
	// Priority and PriorityClass are what the pod-grouper recorded
	// (api.AnnotationPriority); Priority is nil when none is.
	Priority      *int32
	PriorityClass string

	// Native is a scheduling.k8s.io/v1beta1 PodGroup (cli/native.go):
	// MinMember is its gang's minCount, Priority and PriorityClass its
	// spec's. Basic says its policy is basic (no gang, MinMember 1).
	Native bool
	Basic  bool
	// Definition is the muster.io/definition label of a native PodGroup.
	Definition string
	// TopologyRequired is a native PodGroup's topology constraint key.
	TopologyRequired string
	// InitiallyScheduled is a native PodGroup's PodGroupInitiallyScheduled
	// condition, nil while the scheduler has not tried it.
	InitiallyScheduled *ConditionView
}

// describeInput is everything describe needs, gathered live or offline;
// buildDescription turns it into the view without any I/O, so the live
// and the offline path render the same way.
type describeInput struct {
	Root     *unstructured.Unstructured
	Def      defRef
	Compiled *definition.Compiled
	// Pods are the workload's pods (owner chain checked live).
	Pods []*corev1.Pod
	// PodGroups of the workload, by name (live only).
	PodGroups map[string]*podGroupInfo
	// GangPods maps a PodGroup name to every pod of the namespace
	// labelled with it (live only): a gang is counted over all its
	// members, as the scheduler counts it, also when the view holds only
	// some of them (describe pod/<one member>).
	GangPods map[string][]*corev1.Pod
	// NativePodGroups are the workload's native PodGroups
	// (scheduling.k8s.io/v1beta1), by name (live only), and NativeGangPods
	// every pod of the namespace naming each one, or a PodGroup its pods
	// name that does not exist.
	NativePodGroups map[string]*podGroupInfo
	NativeGangPods  map[string][]*corev1.Pod
	// SchedulingEvents maps "Pod/<name>" and "PodGroup/<name>" to the
	// latest FailedScheduling message, SchedulingEventTimes to its time.
	SchedulingEvents     map[string]string
	SchedulingEventTimes map[string]time.Time
	Live                 bool
	Now                  time.Time
	// PodLimit caps the pods shown per component; 0 shows all.
	PodLimit int
	GPUNames []corev1.ResourceName
	// ClaimTemplates are the namespace's ResourceClaimTemplates, whose
	// devices of GPU classes count as the pods' GPUs (nil: none read).
	ClaimTemplates definition.ClaimTemplates
	// Kueue is what Kueue keeps for the workload (live only; nil when it
	// has no Kueue Workload or the cluster runs no Kueue).
	Kueue *kueueInput
	// Warnings are those of gathering the input (a list that failed, a
	// reference not read); the view shows them after its own.
	Warnings []string
}

// resources of one pod or template, in the units of the JSON output.
type podResources struct {
	gpus, cpuMillis, memBytes int64
}

// gpuCount counts a pod spec's GPUs: the extended resources named, and
// the devices its ResourceClaimTemplates ask of the DeviceClasses named.
type gpuCount struct {
	names     []corev1.ResourceName
	templates definition.ClaimTemplates
}

func (in describeInput) gpus() gpuCount {
	return gpuCount{names: in.GPUNames, templates: in.ClaimTemplates}
}

func requestsOf(spec *corev1.PodSpec, g gpuCount) podResources {
	if spec == nil {
		return podResources{}
	}
	rl := definition.PodRequests(spec)
	r := podResources{gpus: definition.GPUs(rl, g.names) + definition.ClaimGPUs(spec, g.templates, g.names)}
	if q, ok := rl[corev1.ResourceCPU]; ok {
		r.cpuMillis = q.MilliValue()
	}
	if q, ok := rl[corev1.ResourceMemory]; ok {
		r.memBytes = q.Value()
	}
	return r
}

// buildDescription turns what describe gathered into the view: the
// components and instances the spec asks for, the pods found in them, the
// gangs the pods form and the gangs the spec plans. It does no I/O, so
// every renderer shows the same view, live or offline.
func buildDescription(ctx context.Context, in describeInput) (*Description, error) {
	d := newDescription(in)
	wl, err := in.Compiled.Extract(ctx, in.Root)
	if err != nil {
		return nil, invalidErrorf("definition %s on %s %s: %v", in.Def.Name, in.Root.GetKind(), in.Root.GetName(), err)
	}
	addStatus(ctx, d, in)
	compIdx := addComponents(d, wl, in.gpus())
	placed, gangs := placePods(ctx, d, in, compIdx)
	countPods(d, placed, in.PodLimit)
	addGangs(d, in, gangs)
	addPlans(ctx, d, in)
	if in.Kueue != nil {
		d.Queue = queueView(in.Kueue, in.gpus(), pendingGangReason(d))
	}
	d.Warnings = append(d.Warnings, schedulerWarnings(in.Pods, heldNativeGangs(d))...)
	d.Warnings = append(d.Warnings, in.Warnings...)
	return d, nil
}

// newDescription is the header of the view: what the workload is and
// which definition reads it.
func newDescription(in describeInput) *Description {
	root := in.Root
	d := &Description{
		Kind:             root.GetKind(),
		APIVersion:       root.GetAPIVersion(),
		Name:             root.GetName(),
		Namespace:        root.GetNamespace(),
		Definition:       in.Def.Name,
		DefinitionOrigin: in.Def.Origin,
		DefinitionSource: in.Def.Source,
		Live:             in.Live,
		Components:       []ComponentView{},
		Gangs:            []GangView{},
		Plans:            []GangPlanView{},
	}
	if ts := root.GetCreationTimestamp().Time; in.Live && !ts.IsZero() {
		d.Created = ts.UTC().Format(time.RFC3339)
		d.Age = duration.HumanDuration(in.Now.Sub(ts))
	}
	return d
}

// addStatus reads the workload's phases and conditions. A status the
// definition cannot read is a warning, not an error: the tree still shows.
func addStatus(ctx context.Context, d *Description, in describeInput) {
	st, err := in.Compiled.Status(ctx, in.Root)
	if err != nil {
		d.Warnings = append(d.Warnings, fmt.Sprintf("status: %v", err))
		d.Phases = []string{string(kartav1alpha1.StatusUndefined)}
	} else {
		for _, s := range st.ByPrecedence() {
			d.Phases = append(d.Phases, string(s))
		}
		d.Phase = st.Phase
		for _, c := range st.Conditions {
			d.Conditions = append(d.Conditions, ConditionView(c))
		}
	}
	if len(d.Phases) == 0 {
		d.Phases = []string{string(kartav1alpha1.StatusUndefined)}
	}
}

// addComponents adds the components and instances the spec asks for, with
// their desired pods and requests, and returns each one's index by name.
func addComponents(d *Description, wl *definition.Workload, gpus gpuCount) map[string]int {
	compIdx := map[string]int{}
	for _, c := range wl.Components {
		cv := componentView(c, gpus)
		compIdx[c.Name] = len(d.Components)
		d.Components = append(d.Components, cv)
		if c.HasPods {
			d.Totals.Pods += cv.Pods.Desired
			d.Totals.MinPods += cv.Pods.Min
			d.Totals.GPUs += cv.GPUs
			d.Totals.CPUMillis += cv.CPUMillis
			d.Totals.MemoryBytes += cv.MemoryBytes
		}
	}
	return compIdx
}

func componentView(c definition.Component, gpus gpuCount) ComponentView {
	cv := ComponentView{Name: c.Name, Parent: c.Parent, HasPods: c.HasPods, Instances: []InstanceView{}}
	if c.Kind != nil {
		cv.Kind = gvkString(c.Kind.GroupKind(), c.Kind.Version)
	}
	for _, inst := range c.Instances {
		iv := InstanceView{ID: inst.ID, Replicas: inst.Replicas, MinReplicas: inst.MinReplicas, MaxReplicas: inst.MaxReplicas, Items: []PodView{}}
		cv.Replicas += int64(inst.Replicas) // its own total: counts are not multiplied by the parent
		if c.HasPods {
			var r podResources
			if inst.Template != nil {
				r = requestsOf(&inst.Template.Spec, gpus)
			}
			iv.GPUsPerPod, iv.CPUMillisPerPod, iv.MemoryBytesPerPod = r.gpus, r.cpuMillis, r.memBytes
			iv.GPUs = r.gpus * inst.Pods
			iv.Pods.Desired, iv.Pods.Min = inst.Pods, inst.MinPods
			cv.GPUs += iv.GPUs
			cv.CPUMillis += r.cpuMillis * inst.Pods
			cv.MemoryBytes += r.memBytes * inst.Pods
			cv.Pods.Desired += inst.Pods
			cv.Pods.Min += inst.MinPods
		}
		cv.Instances = append(cv.Instances, iv)
	}
	return cv
}

// placedPod is a pod found in one instance of one component of the view.
type placedPod struct {
	comp, inst int
	view       PodView
	healthy    bool
}

// placePods puts each pod in its component and instance, and in its gang;
// a pod that fits nowhere is listed as unmatched, with why.
func placePods(ctx context.Context, d *Description, in describeInput, compIdx map[string]int) ([]placedPod, *gangSet) {
	var placed []placedPod
	gangs := &gangSet{byKey: map[string]*gangAgg{}}
	var warns cappedWarnings
	for _, pod := range in.Pods {
		pv := podView(pod, in.SchedulingEvents, in.gpus())
		ci, ii, m, err := locatePod(ctx, d, in.Compiled, compIdx, pod)
		if err != nil {
			d.Unmatched = append(d.Unmatched, UnmatchedPod{Name: pod.Name, Reason: err.Error()})
			continue
		}
		pv.Replica = m.Replica

		g, err := in.Compiled.GangForPod(ctx, in.Root, pod)
		if err != nil {
			warns.add("gang of pod %s: %v", pod.Name, err)
		}
		if g != nil {
			gangs.add(g, pod)
		}
		placed = append(placed, placedPod{comp: ci, inst: ii, view: pv, healthy: pv.Ready || pod.Status.Phase == corev1.PodSucceeded})
	}
	d.Warnings = append(d.Warnings, warns.lines()...)
	sort.Slice(d.Unmatched, func(i, j int) bool { return d.Unmatched[i].Name < d.Unmatched[j].Name })
	return placed, gangs
}

// locatePod finds the component and instance of d the definition puts pod
// in; the error says, for a person, why it is in none.
func locatePod(ctx context.Context, d *Description, c *definition.Compiled, compIdx map[string]int, pod *corev1.Pod) (ci, ii int, m *definition.PodMatch, err error) {
	m, err = c.MatchPod(ctx, pod)
	if errors.Is(err, definition.ErrNoComponent) {
		return 0, 0, nil, errors.New("no component of the definition selects it")
	}
	if err != nil {
		return 0, 0, nil, err
	}
	ci, ok := compIdx[m.Component]
	if !ok || len(d.Components[ci].Instances) == 0 {
		return 0, 0, nil, fmt.Errorf("component %q has no instance in the spec", m.Component)
	}
	insts := d.Components[ci].Instances
	for i, inst := range insts {
		if inst.ID == m.Instance {
			return ci, i, m, nil
		}
	}
	// The one instance of a component takes its pods, whatever they name.
	if len(insts) == 1 {
		return ci, 0, m, nil
	}
	return 0, 0, nil, fmt.Errorf("instance %q of component %q is not in the spec", m.Instance, m.Component)
}

// cappedWarnings keeps the first few of a warning given per pod: a broken
// definition can fail on every pod, and a handful of lines says it as well
// as a thousand.
type cappedWarnings struct {
	kept []string
	n    int
}

const maxPodWarnings = 5

func (w *cappedWarnings) add(format string, args ...any) {
	if w.n < maxPodWarnings {
		w.kept = append(w.kept, fmt.Sprintf(format, args...))
	}
	w.n++
}

func (w *cappedWarnings) lines() []string {
	if w.n > maxPodWarnings {
		return append(w.kept, fmt.Sprintf("… and %d more such warnings", w.n-maxPodWarnings))
	}
	return w.kept
}

// countPods counts the pods found per instance, component and workload,
// then keeps the pods shown: unhealthy first, --pod-limit per component.
func countPods(d *Description, placed []placedPod, podLimit int) {
	sort.SliceStable(placed, func(i, j int) bool {
		if placed[i].healthy != placed[j].healthy {
			return !placed[i].healthy
		}
		return placed[i].view.Name < placed[j].view.Name
	})
	shown := map[int]int{}
	for _, p := range placed {
		cv := &d.Components[p.comp]
		iv := &cv.Instances[p.inst]
		for _, c := range []*PodCounts{&cv.Pods, &iv.Pods} {
			c.Observed++
			if p.view.Ready {
				c.Ready++
			}
			if p.view.Node != "" {
				c.Bound++
			}
		}
		d.Totals.ObservedPods++
		if p.view.Ready {
			d.Totals.ReadyPods++
		}
		if p.view.Node != "" {
			d.Totals.BoundPods++
		}
		if podLimit > 0 && shown[p.comp] >= podLimit {
			iv.Omitted++
			continue
		}
		shown[p.comp]++
		iv.Items = append(iv.Items, p.view)
	}
}

// schedulerWarnings says, live, when a pod waits that no scheduler has
// looked at: a sandbox has no default scheduler, and a cluster may lack the
// one a pod names, and then nothing else tells (no event, no condition).
// The pod templates themselves are not judged: a definition may not read a
// component's scheduler name, and a cluster may run muster under another
// name. Members of the native gangs in held are left out: the scheduler
// holds them without a condition until the gang has its PodGroup and
// minCount pods, which the gang's reason says.
func schedulerWarnings(pods []*corev1.Pod, held map[string]bool) []string {
	const fix = "muster set-scheduler -f FILE | kubectl apply -f - writes muster-scheduler into every pod template"
	var out []string
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.Spec.SchedulerName == defaultSchedulerName || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending {
			continue
		}
		if n := nativeGroupOf(p); n != "" && held[n] {
			continue
		}
		seen := false
		for _, c := range p.Status.Conditions {
			seen = seen || c.Type == corev1.PodScheduled
		}
		if !seen {
			out = append(out, fmt.Sprintf("pod %s waits for scheduler %q, which has not looked at it (is it running?); to have muster schedule it, %s",
				p.Name, p.Spec.SchedulerName, fix))
			break // one is enough: the others share the template
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func resourceMap(rl corev1.ResourceList) map[string]string {
	if len(rl) == 0 {
		return nil
	}
	out := make(map[string]string, len(rl))
	for k, v := range rl {
		out[string(k)] = v.String()
	}
	return out
}

func podView(p *corev1.Pod, events map[string]string, gpus gpuCount) PodView {
	pv := PodView{
		Name:  p.Name,
		Phase: string(p.Status.Phase),
		Ready: podutils.IsPodReady(p),
		Node:  p.Spec.NodeName,
		GPUs:  requestsOf(&p.Spec, gpus).gpus,
	}
	// A sample pod given offline without any status says nothing about
	// readiness; show it as such rather than as stuck.
	noStatus := p.Status.Phase == "" && len(p.Status.Conditions) == 0 && len(p.Status.ContainerStatuses) == 0
	if noStatus && p.Spec.NodeName == "" {
		return pv
	}
	if pv.Phase == "" {
		pv.Phase = string(corev1.PodPending)
	}
	for _, cs := range p.Status.ContainerStatuses {
		pv.Restarts += cs.RestartCount
	}
	if !pv.Ready {
		pv.Reason = podReason(p, events)
	}
	return pv
}

// podReason says why a pod is not ready, in the words kubectl shows.
func podReason(p *corev1.Pod, events map[string]string) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	if p.Status.Phase == corev1.PodSucceeded {
		return "Completed"
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				return w.Reason
			}
			if t := cs.State.Terminated; t != nil && t.Reason != "" && t.ExitCode != 0 {
				return t.Reason
			}
		}
	}
	if p.Spec.NodeName == "" {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				if c.Message != "" {
					return c.Reason + ": " + c.Message
				}
				return c.Reason
			}
		}
		if m := events["Pod/"+p.Name]; m != "" {
			return "FailedScheduling: " + m
		}
		if len(p.Spec.SchedulingGates) > 0 {
			return "SchedulingGated"
		}
		return "waiting to be scheduled"
	}
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	if p.Status.Phase == corev1.PodFailed {
		return "Failed"
	}
	return "not ready"
}

// pendingGangReason is the reason of the first gang of d that waits, ""
// when none does.
func pendingGangReason(d *Description) string {
	for _, g := range d.Gangs {
		if g.Reason != "" {
			return g.Reason
		}
	}
	return ""
}
