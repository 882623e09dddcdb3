package gang

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/internal/lifecycle"
	"github.com/muster-io/muster/plugins/gang/plan"
	"github.com/muster-io/muster/plugins/gang/victims"
)

// preemptWait is how long past its victims' longest grace period a gang
// waits for them before it plans again.
const preemptWait = 30 * time.Second

// victimGone reports whether a victim no longer holds room: deleted, replaced
// by a pod of the same name, or preempted while waiting at Permit (never
// bound, no longer reserved), and gone from this cycle's snapshot too.
func (p *Plugin) victimGone(victim *v1.Pod) bool {
	if p.inSnapshot(victim) {
		// The informer's lister sees a delete before the scheduler's cache
		// does, and the snapshot is taken at the start of the cycle: ending
		// the wait here let the member find its planned node still full,
		// plan again without the room, drop the plan other gangs counted as
		// held (the victims' recreated pods took the room) and preempt a
		// second time.
		return false
	}
	cur, err := p.podLister.Pods(victim.Namespace).Get(victim.Name)
	if err != nil || cur.UID != victim.UID {
		return true
	}
	return cur.Spec.NodeName == "" && p.h.GetWaitingPod(cur.UID) == nil
}

// inSnapshot reports whether the scheduler's snapshot still has pod on the
// node it was bound or reserved to.
func (p *Plugin) inSnapshot(pod *v1.Pod) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	ni, err := p.h.SnapshotSharedLister().NodeInfos().Get(pod.Spec.NodeName)
	if err != nil {
		return false
	}
	for _, pi := range ni.GetPods() {
		if pi.GetPod().UID == pod.UID {
			return true
		}
	}
	return false
}

// awaitVictims reports whether the gang waits for the victims of its
// preemption, with the reason to show (lifecycle.Gang.AwaitVictims). Call
// with g locked.
func (p *Plugin) awaitVictims(g *lifecycle.Gang, key types.NamespacedName, now time.Time) (string, bool) {
	f, left := g.AwaitVictims(now)
	if f == nil {
		return "", false
	}
	return fmt.Sprintf("gang %s: preempted %s; waiting for %d of %d victim pods to terminate", key, f.Desc, left, len(f.Victims)), true
}

// preemptor describes who preempts: a gang's pending members or one pod.
type preemptor struct {
	// gang is the muster gang; zero for a pod alone.
	gang     types.NamespacedName
	pg       *schedv1alpha1.PodGroup
	pod      *v1.Pod // the pod whose PostFilter runs
	priority int32
	never    bool
	members  []*v1.Pod
}

func (pr *preemptor) name() string {
	if pr.pg != nil {
		return "gang " + pr.gang.String()
	}
	return "pod " + pr.pod.Namespace + "/" + pr.pod.Name
}

// newPreemptor reads priority and preemption policy from the members, as
// native pod-group preemption does without its PodGroup policy field: the
// highest member priority is the gang's, and one member with
// preemptionPolicy Never (set from its PriorityClass at admission) makes the
// gang never preempt.
func newPreemptor(pod *v1.Pod, key types.NamespacedName, pg *schedv1alpha1.PodGroup, members []*v1.Pod) *preemptor {
	pr := &preemptor{gang: key, pg: pg, pod: pod, members: members, priority: corev1helpers.PodPriority(pod)}
	seen := false
	for _, m := range members {
		pr.priority = max(pr.priority, corev1helpers.PodPriority(m))
		pr.never = pr.never || (m.Spec.PreemptionPolicy != nil && *m.Spec.PreemptionPolicy == v1.PreemptNever)
		seen = seen || m.UID == pod.UID
	}
	if !seen {
		pr.members = append(pr.members, pod)
	}
	if pg != nil {
		// What the pod-grouper recorded counts members not seen here.
		if prio, ok := api.PodGroupPriority(pg.Annotations); ok {
			pr.priority = max(pr.priority, prio)
		}
	}
	pr.never = pr.never || (pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever)
	return pr
}

// victimInputFor gathers the snapshot and lookups the search reads.
func (p *Plugin) victimInputFor(pr *preemptor, nodes []fwk.NodeInfo) victims.Input {
	own := map[types.UID]bool{}
	for _, m := range pr.members {
		own[m.UID] = true
	}
	in := victims.Input{
		Nodes:    nodes,
		Priority: pr.priority,
		Own:      func(pod *v1.Pod) bool { return own[pod.UID] },
		MinMember: func(key types.NamespacedName) int {
			if pg := p.podGroup(key); pg != nil {
				return minMember(pg)
			}
			return 0
		},
		GangPriority: func(key types.NamespacedName) (int32, bool) {
			if pg := p.podGroup(key); pg != nil {
				return api.PodGroupPriority(pg.Annotations)
			}
			return 0, false
		},
		GPUNames: gpuResourceNames,
	}
	if p.pdbLister != nil {
		if pdbs, err := p.pdbLister.List(labels.Everything()); err == nil {
			in.PDBs = pdbs
		}
	}
	return in
}

// gpuResourceNames are the resources counted as GPUs in the victim order.
var gpuResourceNames = []v1.ResourceName{"nvidia.com/gpu", "amd.com/gpu"}

// preemptForGang is PostFilter for a gang member whose gang has no
// placement: it searches for whole lower-priority victims whose eviction
// lets the gang's quorum fit by the plan, and evicts them only then.
func (p *Plugin) preemptForGang(ctx context.Context, pod *v1.Pod, key types.NamespacedName) (*fwk.PostFilterResult, *fwk.Status) {
	pg := p.podGroup(key)
	if pg == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	pr := newPreemptor(pod, key, pg, p.members(key))
	if pr.never {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: not preempting: preemptionPolicy is Never", key))
	}
	res, f, status := p.chooseVictims(ctx, pr, key, p.clock.Now())
	if status != nil {
		return nil, status
	}
	msg := fmt.Sprintf("gang %s (priority %d): preempting %d pods of %s so that %d members fit", key, pr.priority, len(f.Victims), f.Desc, len(res.Plan.Assignments))
	klog.FromContext(ctx).V(2).Info("Preempting for gang", "gang", key, "victims", len(f.Victims), "units", len(res.Units), "plans", res.Plans)
	p.recordEvent(pg, v1.EventTypeNormal, "Preempting", "Preempting", api.CapReason(msg))
	p.evict(pr, res.Units)
	preemptions.WithLabelValues(resultPreempted).Inc()
	p.status.enqueue(key)
	var nominating *fwk.NominatingInfo
	if node, ok := res.Plan.Assignments[pod.UID]; ok {
		nominating = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node}
	}
	return &fwk.PostFilterResult{NominatingInfo: nominating}, fwk.NewStatus(fwk.Success, api.CapReason(msg))
}

// chooseVictims is preemptForGang's decision, with the gang's state locked
// from the first look to the preemption recorded: the victims, and the
// preemption it starts; or why there is none.
func (p *Plugin) chooseVictims(ctx context.Context, pr *preemptor, key types.NamespacedName, now time.Time) (*victims.Result, lifecycle.Preemption, *fwk.Status) {
	g := p.gangs.Lock(key)
	defer g.Unlock()
	if status := p.preemptionBlocked(g, pr.pg, key, now); status != nil {
		return nil, lifecycle.Preemption{}, status
	}
	seq := p.gangs.Seq()
	req, pending, err := p.gangRequest(key, pr.pg, g, pr.pod, now)
	if err != nil {
		return nil, lifecycle.Preemption{}, fwk.AsStatus(err)
	}
	req.Held, _ = plan.HoldNominated(req, pr.pod, p.nominatedPods)
	res, terminating, err := p.search(ctx, pr, req)
	if err != nil {
		var wnf *victims.WouldNotFitError
		if !errors.As(err, &wnf) {
			return nil, lifecycle.Preemption{}, fwk.AsStatus(err)
		}
		msg := api.CapReason(fmt.Sprintf("gang %s: %s", key, wnf.Error()))
		g.SetPreemptVerdict(msg, now.Add(p.backoff()), seq)
		preemptions.WithLabelValues(resultWouldNotFit).Inc()
		return nil, lifecycle.Preemption{}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if len(res.Units) == 0 {
		return nil, lifecycle.Preemption{}, p.fitsWithoutPreemption(g, key, terminating, now)
	}
	return res, p.startPreemption(ctx, g, pr, pending, res, now), nil
}

// preemptionBlocked says why the gang may not preempt now, or nil. Call
// with g locked.
func (p *Plugin) preemptionBlocked(g *lifecycle.Gang, pg *schedv1alpha1.PodGroup, key types.NamespacedName, now time.Time) *fwk.Status {
	if msg, waiting := p.awaitVictims(g, key, now); waiting {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if g.LivePlan(now) {
		// A plan exists; this member's failure is the plan's business.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if g.Quorum() >= minMember(pg) {
		// The quorum runs: this member is an extra, placed as room
		// exists. Extras never preempt.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: its quorum is placed; extra members wait for free room and do not preempt", key))
	}
	if msg, ok := g.PreemptVerdict(now); ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	return nil
}

// fitsWithoutPreemption answers a search that found the gang fitting
// without victims. Call with g locked.
func (p *Plugin) fitsWithoutPreemption(g *lifecycle.Gang, key types.NamespacedName, terminating int, now time.Time) *fwk.Status {
	if terminating > 0 {
		// Room being freed already suffices: wait for it.
		g.Retry()
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: fits once %d terminating pods are gone; not preempting more", key, terminating))
	}
	if g.ReplanLimited(now) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: fits without preemption, but was just planned again; planning again after backoff", key))
	}
	// It fits now (the snapshot moved since PreFilter): plan again.
	g.ForgetVerdict()
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: fits without preemption now; planning again", key))
}

// startPreemption records the preemption of res's victims: the gang keeps
// the plan made without them, and its pending members other than pr's pod
// are nominated on their planned nodes in the scheduler's memory. Call with
// g locked.
func (p *Plugin) startPreemption(ctx context.Context, g *lifecycle.Gang, pr *preemptor, pending []*v1.Pod, res *victims.Result, now time.Time) lifecycle.Preemption {
	evicted := victims.Pods(res.Units)
	f := lifecycle.Preemption{Victims: evicted, Until: now.Add(maxGrace(evicted) + preemptWait), Desc: victims.Describe(res.Units)}
	planPods := map[types.UID]fwk.PodInfo{}
	for _, m := range pending {
		if _, ok := res.Plan.Assignments[m.UID]; ok {
			pi, _ := framework.NewPodInfo(m)
			planPods[m.UID] = pi
			if m.UID != pr.pod.UID {
				f.Nominated = append(f.Nominated, m)
			}
		}
	}
	g.StartPreemption(f, res.Plan, planPods, f.Until.Add(p.permitTimeout(pr.pg)+p.backoff()))
	logger := klog.FromContext(ctx)
	for _, m := range f.Nominated {
		p.h.AddNominatedPod(logger, planPods[m.UID], &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: res.Plan.Assignments[m.UID]})
	}
	g.Retry()
	return f
}

// preemptForPod is PostFilter for a pod scheduled alone (gang-free): the
// same search with a gang of one, so a gang member is a victim only with
// its whole gang. It replaces DefaultPreemption for these pods (MusterGang
// runs first in the profile's postFilter and always answers them).
func (p *Plugin) preemptForPod(ctx context.Context, pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	pr := newPreemptor(pod, types.NamespacedName{}, nil, nil)
	if pr.never {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "not preempting: preemptionPolicy is Never")
	}
	nodes, err := p.h.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	// Like DefaultPreemption: while lower-priority pods preempted for this
	// pod still terminate on its nominated node, do not preempt again.
	if nnn := pod.Status.NominatedNodeName; nnn != "" {
		if ni, err := p.h.SnapshotSharedLister().NodeInfos().Get(nnn); err == nil {
			for _, pi := range ni.GetPods() {
				if corev1helpers.PodPriority(pi.GetPod()) < pr.priority && preemption.PodTerminatingByPreemption(pi.GetPod()) {
					return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("waiting for preempted pods on node %s to terminate", nnn))
				}
			}
		}
	}
	req := plan.Request{
		Gang:      fmt.Sprintf("%s/%s", pod.Namespace, pod.Name),
		MinMember: 1,
		Pending:   []*v1.Pod{pod},
		Nodes:     nodes,
		Held:      p.gangs.Held(types.NamespacedName{}, p.clock.Now()),
	}
	if p.runner != nil {
		req.Filter = p.planFilter()
	}
	// As DefaultPreemption: room nominated to pods of its priority or more
	// is not this pod's to take.
	req.Held, _ = plan.HoldNominated(req, pod, p.nominatedPods)
	res, terminating, err := p.search(ctx, pr, req)
	if err != nil {
		var wnf *victims.WouldNotFitError
		if errors.As(err, &wnf) {
			wnf.Who = "the pod"
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, api.CapReason(wnf.Error()))
		}
		return nil, fwk.AsStatus(err)
	}
	node := res.Plan.Assignments[pod.UID]
	if len(res.Units) == 0 || node == "" {
		if terminating > 0 {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("fits once %d terminating pods are gone; not preempting more", terminating))
		}
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "fits without preemption now")
	}
	msg := fmt.Sprintf("preempting %d pods of %s for pod %s/%s on node %s", len(victims.Pods(res.Units)), victims.Describe(res.Units), pod.Namespace, pod.Name, node)
	klog.FromContext(ctx).V(2).Info("Preempting for pod", "pod", klog.KObj(pod), "node", node, "units", len(res.Units), "plans", res.Plans)
	p.evict(pr, res.Units)
	preemptions.WithLabelValues(resultPreempted).Inc()
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: node}}, fwk.NewStatus(fwk.Success, api.CapReason(msg))
}

// search runs the victim search for pr on req's snapshot (see
// victims.Find: terminating pods count as gone, and how many the result
// relies on is returned).
func (p *Plugin) search(ctx context.Context, pr *preemptor, req plan.Request) (*victims.Result, int, error) {
	return victims.Find(ctx, req, p.victimInputFor(pr, req.Nodes))
}

func maxGrace(pods []*v1.Pod) time.Duration {
	g := int64(v1.DefaultTerminationGracePeriodSeconds)
	for _, pod := range pods {
		if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
			g = max(g, *s)
		}
	}
	return time.Duration(g) * time.Second
}

// evict evicts the chosen units asynchronously with DefaultPreemption's own
// executor: the DisruptionTarget condition, then a graceful delete through
// the API (a victim waiting at Permit is rejected in memory instead), and a
// Preempted event on the pod naming the preemptor. Each muster victim gang
// also gets an event on its PodGroup.
func (p *Plugin) evict(pr *preemptor, units []*victims.Unit) {
	for _, u := range units {
		if u.Gang.Name == "" {
			continue
		}
		if vpg := p.podGroup(u.Gang); vpg != nil {
			what := "evicted whole"
			if u.Extra {
				what = "loses an extra member above its quorum"
			}
			p.recordEvent(vpg, v1.EventTypeWarning, "Preempted", "Preempting", api.CapReason(fmt.Sprintf("%s %s: preempted by higher-priority %s (priority %d)", u.Key, what, pr.name(), pr.priority)))
		}
	}
	pods := victims.Pods(units)
	cand := &candidate{victims: pods}
	ep := &executorPreemptor{pr: pr}
	go func() {
		ctx := klog.NewContext(context.Background(), p.logger)
		var mu sync.Mutex
		var errs []error
		p.h.Parallelizer().Until(ctx, len(pods), func(i int) {
			if _, err := p.executor.PreemptPod(ctx, cand, ep, pods[i], Name); err != nil && !apierrors.IsNotFound(err) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}, Name)
		if len(errs) == 0 {
			return
		}
		p.logger.Error(errors.Join(errs...), "Preemption failed; the preemptor will search again", "preemptor", pr.name())
		if pr.pg == nil {
			return
		}
		p.gangs.PreemptionFailed(pr.gang)
		p.activate(p.members(pr.gang)...)
	}()
}

// candidate is the victim set in the form the executor takes.
type candidate struct{ victims []*v1.Pod }

func (c *candidate) Victims() *extenderv1.Victims { return &extenderv1.Victims{Pods: c.victims} }

// Name is where the executor says the room is made: gangs span nodes.
func (c *candidate) Name() string                { return "cluster" }
func (c *candidate) NumPodGroupDisruptions() int { return 0 }

// executorPreemptor presents the preemptor to the executor, which writes
// Type into the victims' DisruptionTarget condition ("preempting to
// accommodate a higher priority <Type>") and event: it names the gang.
type executorPreemptor struct{ pr *preemptor }

func (e *executorPreemptor) GetName() string {
	if e.pr.pg != nil {
		return e.pr.pg.Name
	}
	return e.pr.pod.Name
}

func (e *executorPreemptor) GetNamespace() string { return e.pr.pod.Namespace }

func (e *executorPreemptor) UID() types.UID {
	if e.pr.pg != nil {
		return e.pr.pg.UID
	}
	return e.pr.pod.UID
}

func (e *executorPreemptor) SchedulerName() string { return e.pr.pod.Spec.SchedulerName }

func (e *executorPreemptor) Obj() runtime.Object {
	if e.pr.pg != nil {
		ref := e.pr.pg.DeepCopy()
		ref.APIVersion = schedv1alpha1.SchemeGroupVersion.String()
		ref.Kind = "PodGroup"
		return ref
	}
	return e.pr.pod
}

func (e *executorPreemptor) Pods() map[string]*v1.Pod {
	m := map[string]*v1.Pod{}
	for _, pod := range e.pr.members {
		if pod.Spec.NodeName == "" {
			m[pod.Name] = pod
		}
	}
	return m
}

func (e *executorPreemptor) Priority() int32 { return e.pr.priority }

func (e *executorPreemptor) Type() string { return e.pr.name() }

var _ preemption.ExecutorPreemptor = &executorPreemptor{}
var _ preemption.Candidate = &candidate{}
