package podgrouper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/naming"
)

// Event reasons on pods.
const (
	eventReasonYield = "GangManagedElsewhere"
	// eventReasonGangUnknown: muster cannot compute the gang; the pods wait.
	eventReasonGangUnknown = "GangUnknown"
)

// workloadNoteInterval is how often the same note is repeated on one
// workload: every pod of a workload with a broken annotation meets the same
// cause, and one event per pod per resync would flood the namespace.
const workloadNoteInterval = 10 * time.Minute

// noteWorkload records an event on the workload, at most once per
// workloadNoteInterval for the same note.
func (c *Controller) noteWorkload(ref *corev1.ObjectReference, eventType, reason, note string) {
	if c.recorder == nil || ref == nil {
		return
	}
	key := string(ref.UID) + "\x00" + reason + "\x00" + note
	now := time.Now()
	if prev, ok := c.workloadNotes.Load(key); ok && now.Sub(prev.(time.Time)) < workloadNoteInterval {
		return
	}
	c.workloadNotes.Store(key, now)
	c.recorder.Event(ref, eventType, reason, note)
}

// decision is what the pod-grouper wants for one pod: a gang (PodGroup name
// and object), scheduled alone (reason), or held (hold) when the gang cannot
// be computed.
type decision struct {
	gang   *definition.Gang
	pgName string
	pg     *schedv1alpha1.PodGroup
	// nativePG is the gang's native PodGroup, in native mode, for gangs
	// of a workload above the pod (a bare pod has no UID at admission).
	nativePG *schedv1beta1.PodGroup
	rootUID  types.UID
	reason   string // gang-free reason
	yieldMsg string // set when another mechanism owns the pod
	// hold, when set, says why muster cannot compute the pod's gang (a
	// broken definition, an evaluation error, an invalid annotation). The
	// pod waits in the scheduler instead of being scheduled alone: an
	// unlabelled pod is marked muster.io/grouping: waiting with this
	// reason (markWaiting), and a pod already in a gang keeps its label and
	// PodGroup. Fail closed, never open.
	hold string
	// workload is the object the hold is reported on.
	workload *corev1.ObjectReference
}

// sync reconciles one pod from scratch: it is safe to repeat and converges
// from any state the pod-grouper left after a crash.
func (c *Controller) sync(ctx context.Context, key string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", key)
	ctx = klog.NewContext(ctx, logger)
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not ours to retry: a malformed key never becomes valid
	}
	pod, err := c.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !c.ownScheduler(pod.Spec.SchedulerName) || pod.DeletionTimestamp != nil {
		return nil
	}
	if c.native != nil && pod.Spec.SchedulingGroup != nil {
		return c.syncNative(ctx, pod)
	}
	if c.nativeOnly[pod.Spec.SchedulerName] {
		// Not joined at creation (its namespace is not opted in, or it
		// predates native mode): its scheduler reads no label of ours,
		// and the field cannot be set any more.
		return nil
	}
	if msg := foreignMarker(pod); msg != "" {
		c.yield(ctx, pod, msg)
		return nil
	}
	d, err := c.decide(ctx, pod)
	if err != nil {
		return err
	}
	if d.rootUID != "" {
		c.index.set(key, d.rootUID)
	}
	// A pod-group label we would not write names someone else's PodGroup.
	if v := pod.Labels[api.LabelPodGroup]; v != "" && (d.gang == nil || v != d.pgName) {
		if pg, err := c.cachedPodGroup(ns, v); err != nil || !isMusterPodGroup(pg) {
			c.yield(ctx, pod, fmt.Sprintf("label %s=%s names a PodGroup muster did not create", api.LabelPodGroup, v))
			return nil
		}
	}
	if d.hold != "" {
		c.noteOnce(pod, corev1.EventTypeWarning, eventReasonGangUnknown, d.hold)
		c.noteWorkload(d.workload, corev1.EventTypeWarning, eventReasonGangUnknown, d.hold)
		return c.markWaiting(ctx, pod, d.hold)
	}
	if d.gang == nil {
		c.priorities.remove(key)
		return c.markAlone(ctx, pod, d.reason)
	}
	// Recorded before the PodGroup is written: see memberPriorities.
	c.priorities.set(key, ns+"/"+d.pgName, priorityOf(pod))
	msg, prio, err := c.ensurePodGroup(ctx, d.pg)
	if err != nil {
		errorsTotal.WithLabelValues(reasonPodGroup).Inc()
		return err
	} else if msg != "" {
		c.priorities.remove(key)
		c.yield(ctx, pod, msg)
		return nil
	}
	c.notePriorityMixed(d, pod, prio)
	return c.labelMember(ctx, pod, d.pgName)
}

// foreignMarker returns why another gang mechanism owns pod, or "".
func foreignMarker(pod *corev1.Pod) string {
	if g := pod.Spec.SchedulingGroup; g != nil {
		name := ""
		if g.PodGroupName != nil {
			name = *g.PodGroupName
		}
		return fmt.Sprintf("spec.schedulingGroup is set (native Kubernetes PodGroup %q)", name)
	}
	if f, ok := api.ForeignGangOf(pod.Annotations); ok {
		return fmt.Sprintf("annotation %s=%s (%s PodGroup)", f.Key, f.Group, f.Mechanism)
	}
	return ""
}

// yield writes nothing and records, once per pod, why. "Once" outlives
// the process: a pod this process has not noted yet may have been noted by
// the one before it (a restart, a new leader), so the events of the pod are
// looked up first. That is one List per yielded pod per process, and
// yielded pods are few.
func (c *Controller) yield(ctx context.Context, pod *corev1.Pod, why string) {
	c.priorities.remove(pod.Namespace + "/" + pod.Name)
	if c.recorder == nil {
		return
	}
	note := "Pod already belongs to another gang mechanism: " + why + "; muster writes no PodGroup and no label for it"
	if _, seen := c.yielded.Load(pod.UID); !seen && c.recordedBefore(ctx, pod, eventReasonYield, note) {
		c.yielded.Store(pod.UID, noteKey(eventReasonYield, note))
		return
	}
	c.noteOnce(pod, corev1.EventTypeNormal, eventReasonYield, note)
}

// recordedBefore reports whether an event of reason with note about pod
// exists. A failed lookup counts as none: the note repeated beats the note
// lost.
func (c *Controller) recordedBefore(ctx context.Context, pod *corev1.Pod, reason, note string) bool {
	sel := fields.Set{"involvedObject.uid": string(pod.UID), "reason": reason}.AsSelector().String()
	list, err := c.kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: "0"})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot look up the pod's earlier events; recording the note again", "reason", reason, "err", err)
		return false
	}
	// Checked here too: not every client filters by the selector.
	for _, e := range list.Items {
		if e.InvolvedObject.UID == pod.UID && e.Reason == reason && e.Message == note {
			return true
		}
	}
	return false
}

// noteOnce records an event unless the same note was recorded for this pod.
func (c *Controller) noteOnce(pod *corev1.Pod, eventType, reason, note string) {
	if c.recorder == nil {
		return
	}
	if prev, ok := c.yielded.Load(pod.UID); ok && prev == noteKey(reason, note) {
		return
	}
	c.yielded.Store(pod.UID, noteKey(reason, note))
	c.recorder.Event(pod, eventType, reason, note)
}

// noteKey is what c.yielded remembers of the last note on a pod.
func noteKey(reason, note string) string { return reason + "\x00" + note }

// decide resolves the pod's workload and gang.
func (c *Controller) decide(ctx context.Context, pod *corev1.Pod) (*decision, error) {
	chain, err := c.owners.chain(ctx, pod)
	if err != nil {
		errorsTotal.WithLabelValues(reasonOwners).Inc()
		return nil, err
	}
	// The top-most object with a definition wins; a wrapper above it without
	// one (an Argo Workflow, a pipeline) is ignored.
	top := -1
	var entry *Entry
	for i := len(chain) - 1; i >= 0; i-- {
		if e, ok := c.defs.LookupGVK(chain[i].GVK); ok {
			top, entry = i, e
			break
		}
		if e, ok := c.defs.Broken(chain[i].GVK.GroupKind()); ok {
			errorsTotal.WithLabelValues(reasonDefinition).Inc()
			return &decision{
				hold: api.CapReason(fmt.Sprintf("Workload definition %s (%s) is invalid, so the pods of %s wait until it is fixed: %s",
					e.Name, e.Source, chain[i], statusMessage(e.Err))),
				workload: chain[i].ref(),
			}, nil
		}
	}
	if entry == nil {
		kinds := make([]string, len(chain))
		for i, l := range chain {
			kinds[i] = l.GVK.Kind
		}
		return &decision{reason: "no workload definition for the pod or its owners (" + strings.Join(kinds, " → ") + ")"}, nil
	}
	l := chain[top]
	var root *unstructured.Unstructured
	if top == 0 {
		root, err = podAsUnstructured(pod)
	} else {
		root, err = c.roots.get(ctx, l)
	}
	if err != nil {
		errorsTotal.WithLabelValues(reasonRoot).Inc()
		return nil, err
	}
	d := &decision{rootUID: l.UID}
	if top == 0 {
		d.rootUID = ""
	}
	ctx, hold, recheck := c.bindReferences(ctx, entry, root, l)
	if hold != "" {
		d.workload, d.hold = l.ref(), hold
		return d, nil
	}
	gang, err := entry.Grouper.GangForPod(ctx, root, pod)
	switch {
	case errors.Is(err, definition.ErrNoComponent):
		d.reason = fmt.Sprintf("pod matches no component of definition %s", entry.Name)
		return d, nil
	case err != nil:
		d.workload = l.ref()
		var ae *definition.AnnotationError
		var ue *definition.UnresolvedError
		if errors.As(err, &ue) {
			errorsTotal.WithLabelValues(reasonRoot).Inc()
			d.hold = unresolvedHold(entry, l, ue)
			if recheck {
				c.queue.AddAfter(cache.MetaObjectToName(pod).String(), unmappedRecheck)
			}
			return d, nil
		}
		if errors.As(err, &ae) {
			errorsTotal.WithLabelValues(reasonAnnotation).Inc()
			d.hold = api.CapReason(fmt.Sprintf("%s: %v; the pods wait until the annotation is fixed or removed", l, ae))
			return d, nil
		}
		errorsTotal.WithLabelValues(reasonDefinition).Inc()
		d.hold = api.CapReason(fmt.Sprintf("Workload definition %s (%s) failed on %s, so its pods wait: %v; fix the definition", entry.Name, entry.Source, l, err))
		return d, nil
	case gang == nil:
		d.reason = aloneReason(entry, root)
		return d, nil
	}
	karta := entry.Grouper.Definition()
	d.gang = gang
	d.workload = l.ref()
	d.pgName = naming.PodGroupName(root.GetName(), karta, gang.Definition, gang.Keys)
	d.pg = desiredPodGroup(d.pgName, pod.Namespace, root, entry.Name, gang, c.opts.ScheduleTimeoutSeconds)
	if c.native != nil && top > 0 {
		d.nativePG = desiredNativePodGroup(nativeName(root, entry, gang), pod, root, entry.Name, gang)
	}
	return d, nil
}

// aloneReason says why GangForPod put the pod in no gang.
func aloneReason(e *Entry, root *unstructured.Unstructured) string {
	if root.GetAnnotations()[api.AnnotationGang] == api.GangOff {
		return fmt.Sprintf("workload %s %s opted out with %s=%s", root.GetKind(), root.GetName(), api.AnnotationGang, api.GangOff)
	}
	k := e.Grouper.Definition()
	if k == nil || k.Spec.OptimizationInstructions == nil || k.Spec.OptimizationInstructions.GangScheduling == nil {
		return fmt.Sprintf("definition %s has no gang instruction", e.Name)
	}
	return fmt.Sprintf("pod is a member of no gang of definition %s", e.Name)
}

func podAsUnstructured(pod *corev1.Pod) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		return nil, fmt.Errorf("converting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	return u, nil
}

// pgWrittenTTL bounds how long a PodGroup this process wrote is trusted
// over the informer cache. The informer normally shows the write within
// milliseconds (and its events drop the entry at once); the bound only
// matters when it never does, e.g. a PodGroup deleted right after its
// creation.
const pgWrittenTTL = 30 * time.Second

// pgWrittenSeen tells the overlay of own writes what the informer saw.
func (c *Controller) pgWrittenSeen(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pg, ok := obj.(*schedv1alpha1.PodGroup)
	if !ok {
		return
	}
	if deleted {
		c.pgWritten.OnDelete(pg)
		return
	}
	c.pgWritten.OnAddOrUpdate(pg)
}

// cachedPodGroup reads a PodGroup from the informer cache overlaid with this
// process's own writes. The object is shared: never modify it.
func (c *Controller) cachedPodGroup(ns, name string) (*schedv1alpha1.PodGroup, error) {
	obj, ok, err := c.pgWritten.GetByKey(ns + "/" + name)
	if err != nil {
		return nil, err
	}
	pg, isPG := obj.(*schedv1alpha1.PodGroup)
	if !ok || !isPG {
		return nil, apierrors.NewNotFound(schedv1alpha1.Resource("podgroups"), name)
	}
	return pg, nil
}

// ensurePodGroup creates want or updates what differs. It returns a yield
// message when a PodGroup of that name exists and is not muster's, and the
// gang's priority it wrote. The priority is computed under the PodGroup's
// lock from every member known (gangPriorityOf), so concurrent syncs of
// the members cannot leave a lower one behind.
//
// The members of one gang usually arrive together and are synced by several
// workers at once: the per-PodGroup lock and the overlay of own writes make
// the first create it and the others find it, without a failed create and a
// read-back each.
func (c *Controller) ensurePodGroup(ctx context.Context, want *schedv1alpha1.PodGroup) (string, gangPriority, error) {
	key := want.Namespace + "/" + want.Name
	defer c.pgLocks.lock(key)()
	prio := c.gangPriorityOf(want.Namespace, want.Name)
	setPriority(want, prio)
	msg, err := c.writePodGroup(ctx, want)
	return msg, prio, err
}

// writePodGroup is ensurePodGroup's write, under the PodGroup's lock.
func (c *Controller) writePodGroup(ctx context.Context, want *schedv1alpha1.PodGroup) (string, error) {
	client := c.pgClient.SchedulingV1alpha1().PodGroups(want.Namespace)
	cur, err := c.cachedPodGroup(want.Namespace, want.Name)
	if apierrors.IsNotFound(err) {
		created, err := client.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		if err == nil {
			c.pgWritten.Mutation(created)
			klog.FromContext(ctx).V(2).Info("Created PodGroup", "podGroup", klog.KObj(want), "minMember", want.Spec.MinMember)
			return "", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating PodGroup %s/%s: %w", want.Namespace, want.Name, err)
		}
		// Created before a restart, or by someone else, and not yet in
		// the cache: read it and fall through to the update.
		if cur, err = client.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
			return "", fmt.Errorf("reading PodGroup %s/%s: %w", want.Namespace, want.Name, err)
		}
	} else if err != nil {
		return "", err
	}
	if !isMusterPodGroup(cur) {
		return fmt.Sprintf("PodGroup %s exists and was not created by muster", want.Name), nil
	}
	first := true
	return "", retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			var err error
			if cur, err = client.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		upd := mergePodGroup(cur, want)
		if upd == nil {
			return nil
		}
		updated, err := client.Update(ctx, upd, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			c.pgWritten.Mutation(updated)
			klog.FromContext(ctx).V(2).Info("Updated PodGroup", "podGroup", klog.KObj(want), "minMember", want.Spec.MinMember)
		}
		return err
	})
}

// labelMember labels pod with its PodGroup and drops a gang-free marker left
// from an earlier decision. Only these keys are written (merge patch):
// labels and annotations of others stay.
func (c *Controller) labelMember(ctx context.Context, pod *corev1.Pod, pgName string) error {
	labels := map[string]any{}
	annotations := map[string]any{}
	if pod.Labels[api.LabelPodGroup] != pgName {
		labels[api.LabelPodGroup] = pgName
	}
	dropMarker(pod, annotations)
	if len(labels) > 0 {
		// The cached pod may not show our own gang-free marker yet (written
		// a moment ago); removing an absent key is a no-op, so always drop
		// it along with the label.
		annotations[api.AnnotationGrouping] = nil
		annotations[api.AnnotationGroupingReason] = nil
	}
	if err := c.patchPod(ctx, pod, labels, annotations); err != nil {
		return err
	}
	if _, seen := c.labelled.LoadOrStore(pod.UID, struct{}{}); !seen && len(labels) > 0 {
		podToPodGroup.Observe(c.clock.Since(pod.CreationTimestamp.Time).Seconds())
	}
	return nil
}

// dropMarker removes the gang-free marker from pod, under either key.
func dropMarker(pod *corev1.Pod, annotations map[string]any) {
	for _, k := range []string{api.AnnotationGrouping, api.AnnotationGroupingReason} {
		if _, ok := pod.Annotations[k]; ok {
			annotations[k] = nil
		}
	}
	dropLegacyMarker(pod, annotations)
}

// dropLegacyMarker removes the marker of earlier releases (muster.io/gang:
// none). Only that value is muster's: on a bare Pod, muster.io/gang: off is
// its user's opt-out and stays.
func dropLegacyMarker(pod *corev1.Pod, annotations map[string]any) {
	if pod.Annotations[api.AnnotationGang] == api.GangNone {
		annotations[api.AnnotationGang] = nil
	}
	if _, ok := pod.Annotations[api.LegacyAnnotationGangReason]; ok {
		annotations[api.LegacyAnnotationGangReason] = nil
	}
}

// markAlone marks pod to be scheduled alone, and drops a pod-group label of
// muster's from an earlier decision (a label of others was yielded to
// before this point).
func (c *Controller) markAlone(ctx context.Context, pod *corev1.Pod, reason string) error {
	labels := map[string]any{}
	if _, ok := pod.Labels[api.LabelPodGroup]; ok {
		labels[api.LabelPodGroup] = nil
	}
	annotations := marker(pod, api.GroupingNone, reason)
	// Our own label may not be in the cached pod yet: drop it too when our
	// last write set one.
	if len(annotations) > 0 && c.lastWriteLabelled(pod.UID) {
		labels[api.LabelPodGroup] = nil
	}
	return c.patchPod(ctx, pod, labels, annotations)
}

// markWaiting marks an unlabelled pod muster.io/grouping: waiting with the
// reason its gang cannot be computed. The scheduler holds such a pod and
// shows the reason in its PodScheduled condition; a pod-group label or the
// gang-free marker replaces the mark once the cause is gone. A member
// (labelled, also by a write the cache does not show yet) keeps its gang,
// and a bound pod is past waiting: neither is written.
func (c *Controller) markWaiting(ctx context.Context, pod *corev1.Pod, reason string) error {
	if pod.Labels[api.LabelPodGroup] != "" || pod.Spec.NodeName != "" || c.lastWriteLabelled(pod.UID) {
		return nil
	}
	return c.patchPod(ctx, pod, nil, marker(pod, api.GroupingWaiting, reason))
}

// marker returns the annotation changes that mark pod with grouping value
// and reason, dropping the marker of earlier releases.
func marker(pod *corev1.Pod, value, reason string) map[string]any {
	annotations := map[string]any{}
	if pod.Annotations[api.AnnotationGrouping] != value {
		annotations[api.AnnotationGrouping] = value
	}
	if pod.Annotations[api.AnnotationGroupingReason] != reason {
		annotations[api.AnnotationGroupingReason] = reason
	}
	dropLegacyMarker(pod, annotations)
	return annotations
}

// lastWriteLabelled reports whether this process's last write to the pod
// left it with a pod-group label.
func (c *Controller) lastWriteLabelled(uid types.UID) bool {
	w, ok := c.written.Load(uid)
	return ok && !strings.HasPrefix(w.(string), "\x00")
}

func (c *Controller) patchPod(ctx context.Context, pod *corev1.Pod, labels, annotations map[string]any) error {
	if len(labels) == 0 && len(annotations) == 0 {
		return nil
	}
	md := map[string]any{}
	if len(labels) > 0 {
		md["labels"] = labels
	}
	if len(annotations) > 0 {
		md["annotations"] = annotations
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	got, err := c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err == nil {
		c.written.Store(got.UID, ourMarks(got))
	}
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	if err != nil {
		errorsTotal.WithLabelValues(reasonPodPatch).Inc()
		return fmt.Errorf("patching pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
