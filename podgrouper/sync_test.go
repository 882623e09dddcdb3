package podgrouper

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition"
)

var (
	pipeline = &obj{gvk: pipelineGVK, name: "pipe", uid: "uid-pipe"}
	trainer  = &obj{gvk: trainerGVK, name: "train", uid: "uid-train", owner: pipeline}
	job      = &obj{gvk: jobGVK, name: "train-worker-0", uid: "uid-job", owner: trainer}
	deploy   = &obj{gvk: deployGVK, name: "web", uid: "uid-web"}
	rs       = &obj{gvk: rsGVK, name: "web-abc", uid: "uid-rs", owner: deploy}
	offTrain = &obj{gvk: trainerGVK, name: "solo", uid: "uid-solo", annot: map[string]string{api.AnnotationGang: api.GangOff}}
	offJob   = &obj{gvk: jobGVK, name: "solo-0", uid: "uid-solo-job", owner: offTrain}
	brokenW  = &obj{gvk: brokenGVK, name: "bad", uid: "uid-bad"}
	badJob   = &obj{gvk: jobGVK, name: "bad-0", uid: "uid-bad-job", owner: brokenW}
	// staleJob names the trainer with a UID that is not the live one's.
	staleTrainer = &obj{gvk: trainerGVK, name: "train", uid: "uid-old-train"}
	staleJob     = &obj{gvk: jobGVK, name: "stale-0", uid: "uid-stale-job", owner: staleTrainer}
)

func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
}

func testDefs(trainerGrouper *fakeGrouper) *fakeDefs {
	return &fakeDefs{
		valid: map[schema.GroupKind]*Entry{
			trainerGVK.GroupKind(): {Name: "trainer", Source: "test", GroupKind: trainerGVK.GroupKind(), Grouper: trainerGrouper},
			jobGVK.GroupKind():     {Name: "job", Source: "test", GroupKind: jobGVK.GroupKind(), Grouper: &fakeGrouper{karta: karta("job", "job")}},
			deployGVK.GroupKind():  {Name: "deployment", Source: "test", GroupKind: deployGVK.GroupKind(), Grouper: &fakeGrouper{karta: karta("deployment", "deployment")}},
		},
		broken: map[schema.GroupKind]*Entry{
			brokenGVK.GroupKind(): {Name: "broken", Source: "karta/broken", GroupKind: brokenGVK.GroupKind(),
				Err: &definition.ValidationError{Definition: "broken", Errs: []error{field.Invalid(field.NewPath("spec", "structureDefinition", "rootComponent", "kind"), nil, "required")}}},
		},
	}
}

func trainerGang(min int32) *fakeGrouper {
	g := &definition.Gang{Definition: "trainer", MinMember: min, MinResources: gpus(4 * int64(min)), TopologyRequired: "rack"}
	return &fakeGrouper{
		karta: karta("trainer", "trainer", "trainer"),
		gangs: map[string]*definition.Gang{"p0": g, "p1": g},
		errs: map[string]error{"nomatch": definition.ErrNoComponent, "boom": errors.New(`.spec.replicas: jq: cannot iterate over null`),
			"badann": &definition.AnnotationError{Key: api.AnnotationMinMember, Value: "abc", Want: "must be a whole number from 1 to 100000"}},
	}
}

func musterPG(name string, min int32) *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{api.LabelDefinition: "trainer"}},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: min},
		Status:     schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupRunning, Running: 2},
	}
}

// syncCase is one pod synced once by TestSync, and what must hold after.
type syncCase struct {
	name       string
	pod        *corev1.Pod
	pgs        []*schedv1alpha1.PodGroup
	wantErr    error
	wantPG     *schedv1alpha1.PodGroup // the PodGroup "train" afterwards, nil = none
	wantLabel  string                  // pod-group label afterwards
	wantReason string                  // substring of muster.io/grouping-reason of a gang-free pod, "" = not gang-free
	wantEvent  string                  // substring of the first event, "" = none
	wantEvents int                     // how many events (default 1 when wantEvent is set)
	wantWrites []string
	// wantWaiting is a substring of muster.io/grouping-reason of a pod
	// marked waiting, "" = not waiting.
	wantWaiting string
}

func TestSync(t *testing.T) {
	owners := []*obj{pipeline, trainer, job, deploy, rs, offTrain, offJob, brokenW, badJob, staleJob}
	roots := []*obj{pipeline, trainer, job, deploy, rs, offTrain, offJob, brokenW, badJob}
	cases := slices.Concat(syncJoinCases(), syncAloneCases(), syncWaitCases(), syncYieldCases(), syncOtherCases())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, testDefs(trainerGang(3)), owners, roots, []*corev1.Pod{tc.pod}, tc.pgs)
			checkSync(t, w, tc)
		})
	}
}

// syncJoinCases: the pod joins its gang, and its PodGroup is written.
func syncJoinCases() []syncCase {
	return []syncCase{
		{
			name: "member of the top-most defined owner, wrapper above ignored",
			pod:  makePod("p0", job),
			wantPG: &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train",
					Labels:      map[string]string{api.LabelWorkloadKind: "Trainer", api.LabelWorkloadName: "train", api.LabelDefinition: "trainer"},
					Annotations: map[string]string{api.AnnotationTopologyRequired: "rack"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "acme.example.com/v1", Kind: "Trainer", Name: "train", UID: "uid-train",
						Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}},
				Spec: schedv1alpha1.PodGroupSpec{MinMember: 3, MinResources: gpus(12)},
			},
			wantLabel:  "train",
			wantWrites: []string{"patch pods", "create podgroups"},
		},
		{
			name:       "existing PodGroup updated, status kept, other labels kept",
			pod:        makePod("p1", job, withLabel("team", "a")),
			pgs:        []*schedv1alpha1.PodGroup{withExtraLabel(musterPG("train", 2), "owner-team", "a")},
			wantLabel:  "train",
			wantWrites: []string{"patch pods", "update podgroups"},
			wantPG: &schedv1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train",
					Labels:      map[string]string{"owner-team": "a", api.LabelWorkloadKind: "Trainer", api.LabelWorkloadName: "train", api.LabelDefinition: "trainer"},
					Annotations: map[string]string{api.AnnotationTopologyRequired: "rack"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "acme.example.com/v1", Kind: "Trainer", Name: "train", UID: "uid-train",
						Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}},
				Spec:   schedv1alpha1.PodGroupSpec{MinMember: 3, MinResources: gpus(12)},
				Status: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupRunning, Running: 2},
			},
		},
		{
			name:       "label naming another muster PodGroup: relabelled",
			pod:        makePod("p0", job, withLabel(api.LabelPodGroup, "old")),
			pgs:        []*schedv1alpha1.PodGroup{musterPG("old", 1)},
			wantLabel:  "train",
			wantWrites: []string{"patch pods", "create podgroups"},
			wantPG:     desiredPodGroup("train", "ns", trainer.unstructured(), "trainer", trainerGang(3).gangs["p0"], nil),
		},
		{
			name:       "gang-free marker dropped when the pod joins a gang",
			pod:        makePod("p0", job, withAnnotation(api.AnnotationGrouping, api.GroupingNone), withAnnotation(api.AnnotationGroupingReason, "old")),
			wantLabel:  "train",
			wantWrites: []string{"patch pods", "create podgroups"},
			wantPG:     desiredPodGroup("train", "ns", trainer.unstructured(), "trainer", trainerGang(3).gangs["p0"], nil),
		},
		{
			name:       "the marker of earlier releases is dropped too when the pod joins a gang",
			pod:        makePod("p0", job, withAnnotation(api.AnnotationGang, api.GangNone), withAnnotation(api.LegacyAnnotationGangReason, "old")),
			wantLabel:  "train",
			wantWrites: []string{"patch pods", "create podgroups"},
			wantPG:     desiredPodGroup("train", "ns", trainer.unstructured(), "trainer", trainerGang(3).gangs["p0"], nil),
		},
	}
}

// syncAloneCases: the pod has no gang and is marked to be scheduled alone.
func syncAloneCases() []syncCase {
	return []syncCase{
		{
			name:       "definition without gangs: scheduled alone",
			pod:        makePod("w0", rs),
			wantReason: "definition deployment has no gang instruction",
			wantWrites: []string{"patch pods"},
		},
		{
			name:       "no definition anywhere",
			pod:        makePod("bare", nil, func(p *corev1.Pod) {}),
			wantReason: "no workload definition for the pod or its owners (Pod)",
			wantWrites: []string{"patch pods"},
		},
		{
			name:       "workload opted out",
			pod:        makePod("o0", offJob),
			wantReason: "opted out with muster.io/gang=off",
			wantWrites: []string{"patch pods"},
		},
		{
			name:       "pod matches no component",
			pod:        makePod("nomatch", job),
			wantReason: "matches no component of definition trainer",
			wantWrites: []string{"patch pods"},
		},
	}
}

// syncWaitCases: the gang cannot be computed.
func syncWaitCases() []syncCase {
	return []syncCase{
		// Fail closed: when the gang cannot be computed the pod is neither
		// labelled nor marked gang-free: it is marked waiting with the
		// cause, so it waits in the scheduler and says why there; one
		// Warning on the pod and one on the workload say it too.
		{
			name:        "evaluation error: the pod waits, the pod and the workload are told",
			pod:         makePod("boom", job),
			wantWaiting: "Workload definition trainer (test) failed on Trainer/ns/train, so its pods wait",
			wantEvent:   "Warning GangUnknown Workload definition trainer (test) failed on Trainer/ns/train, so its pods wait",
			wantEvents:  2,
			wantWrites:  []string{"patch pods"},
		},
		{
			name:       "evaluation error on a grouped member: its label stays, nothing is written",
			pod:        makePod("boom", job, withLabel(api.LabelPodGroup, "train")),
			pgs:        []*schedv1alpha1.PodGroup{musterPG("train", 3)},
			wantLabel:  "train",
			wantEvent:  "Warning GangUnknown",
			wantEvents: 2,
			wantPG:     musterPG("train", 3),
		},
		{
			name:       "evaluation error on a bound pod: nothing is written",
			pod:        makePod("boom", job, func(p *corev1.Pod) { p.Spec.NodeName = "n1" }),
			wantEvent:  "Warning GangUnknown",
			wantEvents: 2,
		},
		{
			name: "evaluation error on a pod scheduled alone before: waiting replaces the marker, old and new",
			pod: makePod("boom", job, withAnnotation(api.AnnotationGrouping, api.GroupingNone), withAnnotation(api.AnnotationGroupingReason, "old"),
				withAnnotation(api.AnnotationGang, api.GangNone), withAnnotation(api.LegacyAnnotationGangReason, "older")),
			wantWaiting: "so its pods wait",
			wantEvent:   "Warning GangUnknown",
			wantEvents:  2,
			wantWrites:  []string{"patch pods"},
		},
		{
			name:        "invalid workload annotation: the pod waits, the annotation is named",
			pod:         makePod("badann", job),
			wantWaiting: `Trainer/ns/train: workload annotation muster.io/min-member: "abc": must be a whole number`,
			wantEvent:   `Warning GangUnknown Trainer/ns/train: workload annotation muster.io/min-member: "abc": must be a whole number`,
			wantEvents:  2,
			wantWrites:  []string{"patch pods"},
		},
		{
			name:        "broken cluster definition: the pod waits, the field is named",
			pod:         makePod("b0", badJob),
			wantWaiting: "spec.structureDefinition.rootComponent.kind",
			wantEvent:   "spec.structureDefinition.rootComponent.kind",
			wantEvents:  2,
			wantWrites:  []string{"patch pods"},
		},
	}
}

// syncYieldCases: another gang mechanism has the pod, and muster yields.
func syncYieldCases() []syncCase {
	return []syncCase{
		{
			name:      "Volcano annotation: yield",
			pod:       makePod("p0", job, withAnnotation(api.AnnotationVolcanoGroup, "vc")),
			wantEvent: "Normal GangManagedElsewhere Pod already belongs to another gang mechanism: annotation scheduling.k8s.io/group-name=vc",
		},
		{
			name:      "KAI annotation: yield",
			pod:       makePod("p0", job, withAnnotation(api.AnnotationKAIGroup, "kai")),
			wantEvent: "KAI Scheduler",
		},
		{
			name: "native scheduling group: yield",
			pod: makePod("p0", job, func(p *corev1.Pod) {
				p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("native")}
			}),
			wantEvent: "spec.schedulingGroup is set",
		},
		{
			name:      "operator's own pod-group label: yield",
			pod:       makePod("p0", job, withLabel(api.LabelPodGroup, "theirs")),
			pgs:       []*schedv1alpha1.PodGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "theirs"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 7}}},
			wantEvent: "label scheduling.x-k8s.io/pod-group=theirs names a PodGroup muster did not create",
		},
		{
			name:      "someone else's PodGroup has the gang's name: yield, nothing written",
			pod:       makePod("p0", job),
			pgs:       []*schedv1alpha1.PodGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 7}}},
			wantEvent: "PodGroup train exists and was not created by muster",
			wantPG:    &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 7}},
		},
		{
			name:      "label naming a PodGroup that does not exist: yield",
			pod:       makePod("p0", job, withLabel(api.LabelPodGroup, "later")),
			wantEvent: "pod-group=later",
		},
	}
}

// syncOtherCases: an owner that is not the live one, and a pod of another
// scheduler.
func syncOtherCases() []syncCase {
	return []syncCase{
		{
			name:    "owner with another UID: retried",
			pod:     makePod("s0", staleJob),
			wantErr: errOwnerGone,
		},
		{
			name: "other scheduler: ignored",
			pod:  makePod("p0", job, func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" }),
		},
	}
}

// checkSync syncs tc's pod once in w and checks what tc wants.
func checkSync(t *testing.T, w *world, tc syncCase) {
	t.Helper()
	err := w.ctrl.sync(w.ctx, "ns/"+tc.pod.Name)
	if tc.wantErr != nil {
		if !errors.Is(err, tc.wantErr) {
			t.Fatalf("sync error = %v, want %v", err, tc.wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	if diff := cmp.Diff(tc.wantWrites, w.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	pod, err := w.kube.CoreV1().Pods("ns").Get(w.ctx, tc.pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSyncedPod(t, pod, tc)
	checkSyncEvents(t, w.events(), tc)
	got, err := w.pg.SchedulingV1alpha1().PodGroups("ns").Get(w.ctx, "train", metav1.GetOptions{})
	if tc.wantPG == nil {
		if err == nil {
			t.Errorf("PodGroup train exists: %+v", got.Spec)
		}
		return
	}
	if err != nil {
		t.Fatalf("PodGroup train: %v", err)
	}
	if diff := cmp.Diff(tc.wantPG, got); diff != "" {
		t.Errorf("PodGroup (-want +got):\n%s", diff)
	}
}

// checkSyncedPod checks the synced pod's label and markers.
func checkSyncedPod(t *testing.T, pod *corev1.Pod, tc syncCase) {
	t.Helper()
	if got := pod.Labels[api.LabelPodGroup]; got != tc.wantLabel && (tc.wantLabel != "" || tc.wantEvent == "") {
		t.Errorf("pod-group label = %q, want %q", got, tc.wantLabel)
	}
	switch {
	case tc.wantReason != "":
		if pod.Annotations[api.AnnotationGrouping] != api.GroupingNone || !strings.Contains(pod.Annotations[api.AnnotationGroupingReason], tc.wantReason) {
			t.Errorf("gang annotations = %v, want none with reason containing %q", pod.Annotations, tc.wantReason)
		}
	case tc.wantWaiting != "":
		if pod.Annotations[api.AnnotationGrouping] != api.GroupingWaiting || !strings.Contains(pod.Annotations[api.AnnotationGroupingReason], tc.wantWaiting) {
			t.Errorf("gang annotations = %v, want waiting with reason containing %q", pod.Annotations, tc.wantWaiting)
		}
	case api.ScheduledAlone(pod.Annotations) || pod.Annotations[api.LegacyAnnotationGangReason] != "" || pod.Annotations[api.AnnotationGroupingReason] != "":
		t.Errorf("pod marked: %v", pod.Annotations)
	}
	if tc.wantReason != "" || tc.wantWaiting != "" {
		if _, ok := pod.Annotations[api.AnnotationGang]; ok {
			t.Errorf("the marker of earlier releases stays: %v", pod.Annotations)
		}
	}
}

// checkSyncEvents checks the events recorded by the sync.
func checkSyncEvents(t *testing.T, events []string, tc syncCase) {
	t.Helper()
	if tc.wantEvent == "" && len(events) > 0 {
		t.Errorf("events = %q, want none", events)
	}
	wantN := tc.wantEvents
	if wantN == 0 {
		wantN = 1
	}
	if tc.wantEvent != "" && (len(events) != wantN || !strings.Contains(events[0], tc.wantEvent)) {
		t.Errorf("events = %q, want %d, the first containing %q", events, wantN, tc.wantEvent)
	}
}

func withExtraLabel(pg *schedv1alpha1.PodGroup, k, v string) *schedv1alpha1.PodGroup {
	pg.Labels[k] = v
	return pg
}

// TestSyncIdempotent: a second sync of a converged pod writes nothing, and a
// yield event is recorded once.
func TestSyncIdempotent(t *testing.T) {
	owners := []*obj{pipeline, trainer, job}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"member", makePod("p0", job)},
		{"alone", makePod("nomatch", job)},
		{"yield", makePod("p0", job, withAnnotation(api.AnnotationKAIGroup, "x"))},
		{"held", makePod("badann", job)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, testDefs(trainerGang(3)), owners, owners, []*corev1.Pod{tc.pod}, nil)
			key := "ns/" + tc.pod.Name
			if err := w.ctrl.sync(w.ctx, key); err != nil {
				t.Fatal(err)
			}
			first := w.events()
			// Let the informers see the writes, as the next sync would.
			waitSynced(t, w, tc.pod.Name)
			w.clearActions()
			if err := w.ctrl.sync(w.ctx, key); err != nil {
				t.Fatal(err)
			}
			if got := w.writes(); len(got) > 0 {
				t.Errorf("second sync wrote %v", got)
			}
			if got := w.events(); len(got) > 0 {
				t.Errorf("second sync recorded %q after %q", got, first)
			}
		})
	}
}

// waitSynced waits until the pod lister and PodGroup lister hold what the
// clients hold.
func waitSynced(t *testing.T, w *world, pod string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(w.ctx, time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		live, err := w.kube.CoreV1().Pods("ns").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cached, err := w.ctrl.podLister.Pods("ns").Get(pod)
		if err != nil || !maps.Equal(cached.Labels, live.Labels) || !maps.Equal(cached.Annotations, live.Annotations) {
			return false, nil
		}
		pgs, err := w.pg.SchedulingV1alpha1().PodGroups("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, pg := range pgs.Items {
			if _, err := w.ctrl.pgLister.PodGroups("ns").Get(pg.Name); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("informers did not catch up: %v", err)
	}
}

// TestRootChangeRequeuesPods: a scale change of the workload requeues the
// pods that resolved to it.
func TestRootChangeRequeuesPods(t *testing.T) {
	owners := []*obj{pipeline, trainer, job}
	w := newWorld(t, testDefs(trainerGang(3)), owners, owners, []*corev1.Pod{makePod("p0", job), makePod("p1", job)}, nil)
	for _, p := range []string{"p0", "p1"} {
		if err := w.ctrl.sync(w.ctx, "ns/"+p); err != nil {
			t.Fatal(err)
		}
	}
	for w.ctrl.queue.Len() > 0 {
		k, _ := w.ctrl.queue.Get()
		w.ctrl.queue.Done(k)
	}
	old := trainer.unstructured()
	cur := old.DeepCopy()
	w.ctrl.rootChanged(old, cur)
	if n := w.ctrl.queue.Len(); n != 0 {
		t.Errorf("unchanged root queued %d pods", n)
	}
	cur.SetGeneration(2)
	w.ctrl.rootChanged(old, cur)
	if n := w.ctrl.queue.Len(); n != 2 {
		t.Errorf("scaled root queued %d pods, want 2", n)
	}
}

// TestYieldNotedOnceAcrossProcesses: the yield event is recorded once per
// pod, also across pod-grouper processes (a restart, a new leader): a
// process that has not seen the pod looks its events up once and records
// none when the same note is there.
func TestYieldNotedOnceAcrossProcesses(t *testing.T) {
	pod := makePod("p0", job, withAnnotation(api.AnnotationVolcanoGroup, "vc"))
	owners := []*obj{pipeline, trainer, job}

	// The earlier process notes the pod; its note is what an Event holds.
	first := newWorld(t, testDefs(trainerGang(3)), owners, owners, []*corev1.Pod{pod}, nil)
	if err := first.ctrl.sync(first.ctx, "ns/p0"); err != nil {
		t.Fatal(err)
	}
	recorded := first.events()
	if len(recorded) != 1 {
		t.Fatalf("first process recorded %q, want one yield event", recorded)
	}
	fields := strings.SplitN(recorded[0], " ", 3) // type, reason, note
	earlier := func(uid types.UID, reason, note string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "ns", Name: "p0.earlier"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p0", UID: uid},
			Reason:         reason, Message: note, Type: fields[0],
		}
	}
	cases := []struct {
		name    string
		event   *corev1.Event // left by the earlier process, nil = none
		wantNew bool
	}{
		{"no earlier event", nil, true},
		{"the earlier process's event", earlier(pod.UID, fields[1], fields[2]), false},
		{"an earlier event with another note", earlier(pod.UID, fields[1], "Pod already belongs to another gang mechanism: something else"), true},
		{"the event of another pod of that name", earlier("uid-gone", fields[1], fields[2]), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, testDefs(trainerGang(3)), owners, owners, []*corev1.Pod{pod}, nil)
			if tc.event != nil {
				if _, err := w.kube.CoreV1().Events("ns").Create(w.ctx, tc.event, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			w.clearActions()
			for range 2 {
				if err := w.ctrl.sync(w.ctx, "ns/p0"); err != nil {
					t.Fatal(err)
				}
			}
			got := w.events()
			if want := map[bool]int{true: 1, false: 0}[tc.wantNew]; len(got) != want {
				t.Errorf("events %q, want %d", got, want)
			}
			lists := 0
			for _, a := range w.kube.Actions() {
				if a.GetVerb() == "list" && a.GetResource().Resource == "events" {
					lists++
				}
			}
			if lists != 1 {
				t.Errorf("%d event lists over two syncs, want 1 (the first sync of a pod this process has not seen)", lists)
			}
			if got := w.writes(); len(got) > 0 {
				t.Errorf("writes %v for a yielded pod", got)
			}
		})
	}
}

// TestCreateFindsForeignPodGroup: a PodGroup of the gang's name that
// muster did not make and the cache does not show yet is found by the
// create; the pod is yielded and never labelled, not even for a moment.
func TestCreateFindsForeignPodGroup(t *testing.T) {
	owners := []*obj{pipeline, trainer, job}
	foreign := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 7}}
	w := newWorld(t, testDefs(trainerGang(3)), owners, owners, []*corev1.Pod{makePod("p0", job)}, nil)
	w.pg.PrependReactor("create", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewAlreadyExists(schedv1alpha1.Resource("podgroups"), "train")
	})
	w.pg.PrependReactor("get", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, foreign.DeepCopy(), nil
	})
	if err := w.ctrl.sync(w.ctx, "ns/p0"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if diff := cmp.Diff([]string{"create podgroups"}, w.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	pod, err := w.kube.CoreV1().Pods("ns").Get(w.ctx, "p0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := pod.Labels[api.LabelPodGroup]; ok {
		t.Errorf("pod-group label %q, want none", got)
	}
	if ev := w.events(); len(ev) != 1 || !strings.Contains(ev[0], "PodGroup train exists and was not created by muster") {
		t.Errorf("events = %q, want one yield naming the PodGroup", ev)
	}
}
