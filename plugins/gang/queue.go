package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/clock"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/plugins/gang/plan"
)

// sortKey is what Less compares. Members of one gang share priority, gang
// time and gang name, so they sit next to each other in the queue and gangs
// do not interleave.
type sortKey struct {
	priority int32
	// gangTime: the PodGroup's creation time for members; the queue time for
	// pods scheduled alone and native groups (as the default sort uses).
	gangTime time.Time
	// gang identifies the gang ("" for a pod alone).
	gangNS, gangName string
	podTime          time.Time
	podNS, podName   string
}

// podInfoEntity is the part of a queued pod entity Less needs.
type podInfoEntity interface {
	GetPodInfo() fwk.PodInfo
}

// groupEntity is the part of a queued native pod group entity Less needs.
type groupEntity interface {
	GetNamespace() string
	GetName() string
}

func (p *Plugin) sortKeyOf(e fwk.QueuedEntityInfo) sortKey {
	k := sortKey{priority: e.GetPriority(), gangTime: e.GetTimestamp()}
	switch x := e.(type) {
	case podInfoEntity:
		pod := x.GetPodInfo().GetPod()
		k.priority = corev1helpers.PodPriority(pod)
		k.podTime, k.podNS, k.podName = pod.CreationTimestamp.Time, pod.Namespace, pod.Name
		if kind, key := p.classify(pod); kind == kindMember {
			k.gangNS, k.gangName = key.Namespace, key.Name
			p.createdMu.RLock()
			t, ok := p.created[key]
			p.createdMu.RUnlock()
			if !ok {
				t = pod.CreationTimestamp.Time
			}
			k.gangTime = t
		}
	case groupEntity:
		// A native pod group is one entity; its name orders ties.
		k.gangNS, k.gangName = x.GetNamespace(), x.GetName()
	}
	return k
}

// Less orders by priority (higher first), then gang time, gang name, pod
// creation time and pod name. It reads only the pods and a cached map.
func (p *Plugin) Less(a, b fwk.QueuedEntityInfo) bool {
	ka, kb := p.sortKeyOf(a), p.sortKeyOf(b)
	if ka.priority != kb.priority {
		return ka.priority > kb.priority
	}
	if !ka.gangTime.Equal(kb.gangTime) {
		return ka.gangTime.Before(kb.gangTime)
	}
	if ka.gangNS != kb.gangNS {
		return ka.gangNS < kb.gangNS
	}
	if ka.gangName != kb.gangName {
		return ka.gangName < kb.gangName
	}
	if !ka.podTime.Equal(kb.podTime) {
		return ka.podTime.Before(kb.podTime)
	}
	if ka.podNS != kb.podNS {
		return ka.podNS < kb.podNS
	}
	return ka.podName < kb.podName
}

// Reasons a pod waits before the queue. They are fixed phrases plus names.
const (
	reasonWaitGrouper  = "waiting for the pod-grouper to label the pod (" + api.LabelPodGroup + " label or " + api.AnnotationGrouping + "=" + api.GroupingNone + " annotation); if this lasts, is muster-podgrouper running with this scheduler name in --scheduler-name?"
	reasonWaitInformer = "waiting for the PodGroup cache to sync (is the scheduling.x-k8s.io PodGroup CRD installed?)"
)

// PreEnqueue keeps a pod out of the queue until it is labelled (or marked
// gang-free), its PodGroup exists and minMember live members exist.
//
// The framework (1.37) keeps the returned reason only in a V(4) log line and
// the unschedulable-reason metric; it writes no pod condition for a gated
// pod. To make a wait visible the plugin records an event on the pod once
// the pod has waited waitEventDelay (noteWaiting). Pods refused for good
// until someone acts (kindHeld, kindForeign) pass, and PreFilter refuses
// them: that writes the reason into their PodScheduled condition, where
// people and cluster autoscalers look.
func (p *Plugin) PreEnqueue(_ context.Context, pod *v1.Pod) *fwk.Status {
	kind, key := p.classify(pod)
	var reason string
	switch kind {
	case kindNative, kindFree, kindHeld, kindForeign:
		p.stopWaiting(pod.UID)
		return nil
	case kindUnlabelled:
		reason = reasonWaitGrouper
	case kindMember:
		reason = p.gangReadiness(key)
		if reason != "" && pod.Status.NominatedNodeName != "" && p.pgSynced.Load() {
			// A waiting member holds no room, but the queue counts a
			// nominated pod on its node even while it waits here. One
			// try clears the nomination (PostFilter, dropNomination);
			// PreFilter refuses it with this reason. Not before the
			// PodGroups are known: PreFilter would say the PodGroup is
			// missing.
			reason = ""
		}
	}
	if reason == "" {
		p.stopWaiting(pod.UID)
		return nil
	}
	p.noteWaiting(pod, reason)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason)
}

// gangReadiness returns why the gang is not ready for scheduling, or "".
func (p *Plugin) gangReadiness(key types.NamespacedName) string {
	if !p.pgSynced.Load() {
		return reasonWaitInformer
	}
	pg := p.podGroup(key)
	if pg == nil {
		return fmt.Sprintf("waiting for PodGroup %s to be created", key)
	}
	return p.missingMembers(key, pg)
}

// missingMembers returns why gang key, of PodGroup pg, waits for members,
// or "" when minMember live members exist.
func (p *Plugin) missingMembers(key types.NamespacedName, pg *schedv1alpha1.PodGroup) string {
	if n, want := len(p.members(key)), minMember(pg); n < want {
		return plan.WaitingForMembers(key.String(), n, want)
	}
	return ""
}

// waitEventDelay is how long a pod waits in PreEnqueue before its reason
// is recorded as an event. A gang normally forms within milliseconds (its
// members are created one after the other, each changing the others'
// "k of n" reason); an event per member and change would cost several API
// writes per pod exactly when the API server is busiest creating the pods.
// A wait that lasts is still visible, with its current reason, after this
// delay, and again within this delay of each later change.
const waitEventDelay = 2 * time.Second

// waitEventQPS and waitEventBurst bound the wait events the plugin writes
// in all. When the pod-grouper falls behind a burst of creates, every new
// pod waits longer than waitEventDelay: at 50 000 pods that was one event
// per pod, the largest kind of write the API server took while the
// pod-grouper waited on it (BENCHMARKS.md, issue 18, session 8). The first
// waits of a burst are shown at once; the others in the order they began,
// as long as they last.
const (
	waitEventQPS   = 10
	waitEventBurst = 100
)

// waitBudget is the part of a client-go rate limiter the event writer uses.
type waitBudget interface {
	Wait(ctx context.Context) error
}

// waitState is one pod's wait in PreEnqueue. Guarded by Plugin.waitMu.
type waitState struct {
	pod      *v1.Pod
	reason   string // the current reason
	recorded string // the reason last recorded as an event
	// timer hands the wait to the event writer (waitEvents) when it fires;
	// nil when no event is pending. At most one is pending per pod, so a
	// pod whose reason keeps changing writes at most one event per
	// waitEventDelay.
	timer clock.Timer
}

// noteWaiting remembers why pod waits and schedules the event that shows
// it, unless the pod stops waiting first (stopWaiting).
func (p *Plugin) noteWaiting(pod *v1.Pod, reason string) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	w := p.waiting[pod.UID]
	if w == nil {
		w = &waitState{}
		p.waiting[pod.UID] = w
	}
	w.pod, w.reason = pod, reason
	if w.timer == nil && reason != w.recorded {
		// The callback takes no lock of the plugin's: a fake clock runs
		// AfterFunc callbacks under its own lock, and stopWaiting stops
		// timers while holding waitMu.
		w.timer = p.clock.AfterFunc(waitEventDelay, func() { p.waitEvents.Add(w) })
	}
}

// writeWaitEvents records the waits handed to it, one at a time, within
// the budget, until the plugin stops.
func (p *Plugin) writeWaitEvents(ctx context.Context) {
	for {
		w, shutdown := p.waitEvents.Get()
		if shutdown {
			return
		}
		p.recordWaiting(ctx, w)
		p.waitEvents.Done(w)
	}
}

// recordWaiting records w's current reason as an event if the pod still
// waits (w is still its wait) and the reason was not recorded yet. A wait
// that ended, or whose reason is shown already, costs no budget.
func (p *Plugin) recordWaiting(ctx context.Context, w *waitState) {
	if !p.waitPending(w) {
		return
	}
	if err := p.waitBudget.Wait(ctx); err != nil {
		return // stopping
	}
	p.waitMu.Lock()
	if !p.waitPendingLocked(w) {
		p.waitMu.Unlock()
		return
	}
	w.timer = nil
	pod, reason := w.pod, w.reason
	w.recorded = reason
	p.waitMu.Unlock()
	if r := p.h.EventRecorder(); r != nil {
		r.Eventf(pod, nil, v1.EventTypeNormal, "GangWaiting", "Scheduling", "%s", reason)
	}
}

// waitPending reports whether w is still its pod's wait with a reason not
// yet recorded. When the reason is recorded already, the hand-over ends
// here (timer cleared) so that the next new reason schedules an event.
func (p *Plugin) waitPending(w *waitState) bool {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	return p.waitPendingLocked(w)
}

func (p *Plugin) waitPendingLocked(w *waitState) bool {
	if p.waiting[w.pod.UID] != w {
		return false
	}
	if w.reason == w.recorded {
		w.timer = nil
		return false
	}
	return true
}

// stopWaiting forgets the pod's wait (it passed PreEnqueue or is gone) and
// cancels its pending event.
func (p *Plugin) stopWaiting(uid types.UID) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	w := p.waiting[uid]
	if w == nil {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(p.waiting, uid)
}

// EventsToRegister lists the events that may let a member in or give a
// rejected gang a placement. Two kinds of change are not here, on purpose:
// PodGroup changes (the scheduler would watch them with a dynamic informer
// whose sync blocks start-up when the CRD is missing) and new members
// completing a quorum (every pod add and bind would be weighed against every
// held pod; see memberJoined). The plugin watches both itself and activates
// the members (onPodGroup, onPod).
func (p *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// Freed capacity may give a rejected gang a placement.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: p.isSchedulableAfterCapacityFreed},
		// The pod-grouper labels or marks the pod, or the annotation of
		// another gang mechanism goes.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: p.isSchedulableAfterPodUpdated},
		// New or changed nodes add capacity or lift taints.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: p.isSchedulableAfterNodeChange},
		// A member's claim appears (the gang waited for it, claimsPending)
		// or a claim lets its devices go.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: p.isSchedulableAfterClaimChange},
		// Devices published or changed, or a class that was missing.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: p.isSchedulableAfterDeviceChange},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: p.isSchedulableAfterDeviceChange},
	}, nil
}

func (p *Plugin) isSchedulableAfterDeviceChange(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	return p.capacityHint(logger, pod, "devices or device classes changed; the gang may fit now"), nil
}

// isSchedulableAfterClaimChange queues a member when a claim of its gang
// appears (the gang may have waited for it) or when any claim's devices go
// free. Allocations, the common update, bring nothing: waking every
// waiting gang for each of them made each re-plan for nothing.
func (p *Plugin) isSchedulableAfterClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldClaim, newClaim, err := util.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	switch {
	case newClaim == nil:
		if oldClaim != nil && oldClaim.Status.Allocation != nil {
			return p.capacityHint(logger, pod, "a claim holding devices went away; the gang may fit now"), nil
		}
	case oldClaim == nil:
		if p.claimOfGang(pod, newClaim) {
			return p.capacityHint(logger, pod, "a claim of the gang was created"), nil
		}
	case oldClaim.Status.Allocation != nil && newClaim.Status.Allocation == nil:
		return p.capacityHint(logger, pod, "a claim let its devices go; the gang may fit now"), nil
	case oldClaim.Status.Allocation == nil && newClaim.Status.Allocation != nil:
		// A claim the gang's members share, allocated for the gang by
		// its plan (devices.Counter.AllocateShared).
		if _, key := p.classify(pod); newClaim.Annotations[api.AnnotationAllocatedForGang] == key.String() {
			logger.V(5).Info("a claim the gang shares was allocated for it", "pod", klog.KObj(pod), "claim", klog.KObj(newClaim))
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

// claimOfGang is true when claim belongs to pod's gang: made for a member
// (its owner), or named by one.
func (p *Plugin) claimOfGang(pod *v1.Pod, claim *resourceapi.ResourceClaim) bool {
	if claim.Namespace != pod.Namespace {
		return false
	}
	_, key := p.classify(pod)
	for _, ref := range claim.OwnerReferences {
		if ref.Kind != "Pod" {
			continue
		}
		owner, err := p.podLister.Pods(claim.Namespace).Get(ref.Name)
		if err != nil {
			// The owner is not in the cache yet: queue rather than
			// leave the gang waiting.
			return true
		}
		if _, k := p.classify(owner); k == key {
			return true
		}
	}
	for i := range pod.Spec.ResourceClaims {
		if n := pod.Spec.ResourceClaims[i].ResourceClaimName; n != nil && *n == claim.Name {
			return true
		}
	}
	return false
}

func (p *Plugin) isSchedulableAfterCapacityFreed(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	return p.capacityHint(logger, pod, "an assigned pod went away; the gang may fit now"), nil
}

// capacityHint queues a member that more room could help, one per gang: the
// gang's members share one plan and one verdict, so one member's attempt
// answers for all (a plan activates the planned siblings, planFor). Queuing
// every member of every waiting gang on every freed pod or node change cost
// a scheduling attempt, an event and often a status patch per member, and
// fed on itself when attempts were cheap: in scenario 2 with
// SchedulerAsyncAPICalls each finished pod sent every waiting member back
// to the queue, 8 000 failed attempts for 800 pods. The siblings are queued
// again once a member of the gang has been tried (wakeConsumed).
func (p *Plugin) capacityHint(logger klog.Logger, pod *v1.Pod, why string) fwk.QueueingHint {
	if !p.mayNeedCapacity(pod) {
		return fwk.QueueSkip
	}
	p.capacityChanged()
	if _, key := p.classify(pod); !p.wakeOne(key) {
		logger.V(5).Info("a sibling is queued already for this change", "pod", klog.KObj(pod), "gang", key)
		return fwk.QueueSkip
	}
	logger.V(5).Info(why, "pod", klog.KObj(pod))
	return fwk.Queue
}

// wakeOne reports whether a capacity hint may queue a member of gang key:
// true for the first since a member of the gang was last tried.
func (p *Plugin) wakeOne(key types.NamespacedName) bool {
	p.wokenMu.Lock()
	defer p.wokenMu.Unlock()
	if p.woken[key] {
		return false
	}
	p.woken[key] = true
	return true
}

// wakeConsumed records that a member of gang key is being tried (or left),
// so the next capacity change may queue one again.
func (p *Plugin) wakeConsumed(key types.NamespacedName) {
	p.wokenMu.Lock()
	delete(p.woken, key)
	p.wokenMu.Unlock()
}

// capacityChanged makes a cached "no placement" verdict stale before the
// member the hint queues is tried again. The plugin's own informer handlers
// count the change too (Tracker.Changed), but they run on their own
// goroutine and may see it after the scheduler has already retried the
// member: the retry then met the old verdict, went back to the
// unschedulable pool, and nothing woke it again (a gang left waiting for
// minutes after its room came back).
func (p *Plugin) capacityChanged() { p.gangs.Changed() }

// mayNeedCapacity is true for a member that more room could help: one
// refused for lack of it. A member PreEnqueue holds back waits for its
// label, its PodGroup or its quorum, which no node or freed pod brings; its
// own events wake it (isSchedulableAfterPodUpdated, onPodGroup, onPod).
func (p *Plugin) mayNeedCapacity(pod *v1.Pod) bool {
	if kind, _ := p.classify(pod); kind != kindMember {
		return false
	}
	p.waitMu.Lock()
	_, held := p.waiting[pod.UID]
	p.waitMu.Unlock()
	return !held
}

func (p *Plugin) isSchedulableAfterPodUpdated(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, newPod, err := util.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	oldKind, oldKey := p.classify(oldPod)
	newKind, newKey := p.classify(newPod)
	// A refused pod whose reason changed is retried too, so that its
	// condition says the current one.
	// The ResourceClaim controller names the pod's claims in its status:
	// the gang may have waited for them (claimsPending).
	claimsNamed := len(oldPod.Status.ResourceClaimStatuses) != len(newPod.Status.ResourceClaimStatuses)
	if oldKind == newKind && oldKey == newKey && refusal(oldKind, oldPod) == refusal(newKind, newPod) && !claimsNamed {
		return fwk.QueueSkip, nil
	}
	if claimsNamed {
		// A verdict "waiting for the claims" is stale now.
		p.capacityChanged()
	}
	logger.V(5).Info("pod's gang changed", "pod", klog.KObj(pod), "gang", newKey)
	return fwk.Queue, nil
}

func (p *Plugin) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	return p.capacityHint(logger, pod, "node added or changed; the gang may fit now"), nil
}

// SignPod opts gang members out of opportunistic batching: their result
// depends on the gang's plan, not on the pod alone. Other pods are not
// affected by this plugin, so they sign with no fragment.
func (p *Plugin) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if kind, _ := p.classify(pod); kind == kindMember {
		return nil, fwk.NewStatus(fwk.Unschedulable, "gang members are planned as a whole")
	}
	return nil, nil
}
