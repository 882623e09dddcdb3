package podgrouper

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/internal/naming"
)

// trainNative is the native PodGroup name of the test world's trainer gang.
var trainNative = naming.NativePodGroupName("train", "uid-train", karta("trainer", "trainer", "trainer"), "trainer", nil)

func nativeOpts() Options { return Options{Native: true} }

func onDefault(p *corev1.Pod) { p.Spec.SchedulerName = DefaultNativeSchedulerName }

func inGroup(name string) podOpt {
	return func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)} }
}

func withPriorityClass(name string, v int32) podOpt {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName, p.Spec.Priority = name, ptr.To(v) }
}

// asCreated is the pod as a webhook sees it on CREATE: no UID yet.
func asCreated(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.UID = ""
	return p
}

func TestAdmit(t *testing.T) {
	owners := []*obj{pipeline, trainer, job, deploy, rs, brokenW, badJob, staleJob}
	roots := []*obj{pipeline, trainer, job, deploy, rs, brokenW, badJob}
	oldPG := musterPG("train", 3)
	oldPG.OwnerReferences = []metav1.OwnerReference{ownerRef(trainer)}
	cases := []struct {
		name        string
		pod         *corev1.Pod
		pgs         []*schedv1alpha1.PodGroup
		notStarted  bool
		wantGroup   string
		wantRefusal string
		wantRetry   bool
		wantWhy     string
		wantEvent   string
	}{
		{name: "member of a gang on muster-scheduler joins", pod: makePod("p0", job), wantGroup: trainNative},
		{name: "member on the default scheduler joins", pod: makePod("p1", job, onDefault), wantGroup: trainNative},
		{name: "already grouped: left alone", pod: makePod("p0", job, inGroup("theirs")), wantWhy: "already set"},
		{name: "another scheduler: left alone", pod: makePod("p0", job, func(p *corev1.Pod) { p.Spec.SchedulerName = "other" }), wantWhy: `scheduler "other"`},
		{name: "another gang mechanism: left alone", pod: makePod("p0", job, withAnnotation(api.AnnotationVolcanoGroup, "vc")), wantWhy: "vc"},
		{name: "gang-free workload: left alone", pod: makePod("w0", rs), wantWhy: "no gang instruction"},
		{name: "no component: left alone", pod: makePod("nomatch", job), wantWhy: "matches no component"},
		{name: "broken definition: refused, said on the workload", pod: makePod("b0", badJob), wantRefusal: "is invalid", wantEvent: "Warning GangUnknown"},
		{name: "bad annotation: refused", pod: makePod("badann", job), wantRefusal: "muster.io/min-member", wantEvent: "Warning GangUnknown"},
		{name: "evaluation error: refused", pod: makePod("boom", job), wantRefusal: "cannot iterate over null", wantEvent: "Warning GangUnknown"},
		{name: "owner gone: refused for a retry", pod: makePod("s0", staleJob), wantRefusal: "cannot compute", wantRetry: true},
		{name: "caches not synced: refused for a retry", pod: makePod("p0", job), notStarted: true, wantRefusal: "starting", wantRetry: true},
		{name: "gang already on a scheduler-plugins PodGroup: stays there", pod: makePod("p0", job), pgs: []*schedv1alpha1.PodGroup{oldPG}, wantWhy: "made before native mode"},
		{name: "a scheduler-plugins PodGroup of another incarnation does not count", pod: makePod("p0", job), pgs: []*schedv1alpha1.PodGroup{musterPG("train", 3)}, wantGroup: trainNative},
		{name: "the default scheduler reads no scheduler-plugins PodGroup: joins", pod: makePod("p0", job, onDefault), pgs: []*schedv1alpha1.PodGroup{oldPG}, wantGroup: trainNative},
		{name: "eviction responders: refused", pod: makePod("p0", job, func(p *corev1.Pod) { p.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: "x"}} }),
			wantRefusal: "evictionResponders", wantEvent: "Warning GangUnknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorldWith(t, nativeOpts(), testDefs(trainerGang(3)), owners, roots, nil, tc.pgs)
			w.ctrl.started.Store(!tc.notStarted)
			got := w.ctrl.Admit(w.ctx, asCreated(tc.pod))
			if got.PodGroup != tc.wantGroup {
				t.Errorf("PodGroup = %q, want %q (%+v)", got.PodGroup, tc.wantGroup, got)
			}
			if (got.Refusal == "") != (tc.wantRefusal == "") || !strings.Contains(got.Refusal, tc.wantRefusal) || got.Retry != tc.wantRetry {
				t.Errorf("refusal = %q (retry %v), want one containing %q (retry %v)", got.Refusal, got.Retry, tc.wantRefusal, tc.wantRetry)
			}
			if !strings.Contains(got.Why, tc.wantWhy) {
				t.Errorf("why = %q, want it to contain %q", got.Why, tc.wantWhy)
			}
			events := w.events()
			if tc.wantEvent == "" && len(events) > 0 || tc.wantEvent != "" && (len(events) != 1 || !strings.Contains(events[0], tc.wantEvent)) {
				t.Errorf("events = %q, want %q", events, tc.wantEvent)
			}
			if writes := w.writes(); len(writes) > 0 {
				t.Errorf("the webhook wrote %v; it must only answer", writes)
			}
		})
	}
}

func TestAdmitOffWithoutNativeMode(t *testing.T) {
	w := newWorld(t, testDefs(trainerGang(3)), []*obj{pipeline, trainer, job}, []*obj{pipeline, trainer, job}, nil, nil)
	if got := w.ctrl.Admit(w.ctx, asCreated(makePod("p0", job))); got.PodGroup != "" || got.Refusal != "" {
		t.Errorf("Admit without native mode = %+v, want the pod left alone", got)
	}
}

func nativePG(name string, min int32, labels map[string]string) *schedv1beta1.PodGroup {
	return &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: min}}},
	}
}

func musterNativeLabels() map[string]string {
	return map[string]string{api.LabelWorkloadKind: "Trainer", api.LabelWorkloadName: "train", api.LabelWorkloadUID: "uid-train", api.LabelDefinition: "trainer"}
}

func TestSyncNative(t *testing.T) {
	owners := []*obj{pipeline, trainer, job, deploy, rs, brokenW, badJob}
	roots := owners
	want := &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: trainNative, Labels: musterNativeLabels(),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "acme.example.com/v1", Kind: "Trainer", Name: "train", UID: "uid-train", BlockOwnerDeletion: ptr.To(false)}}},
		Spec: schedv1beta1.PodGroupSpec{
			SchedulingPolicy:  schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 3}},
			PriorityClassName: "high",
		},
	}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		existing   []runtime.Object
		wantPG     *schedv1beta1.PodGroup
		wantWrites []string
		wantEvent  string
	}{
		{name: "joined member: its PodGroup is created, the pod is not written",
			pod: makePod("p0", job, inGroup(trainNative), withPriorityClass("high", 1000)), wantPG: want, wantWrites: []string{"create podgroups"}},
		{name: "joined member on the default scheduler: the same",
			pod: makePod("p0", job, onDefault, inGroup(trainNative), withPriorityClass("high", 1000)), wantPG: want, wantWrites: []string{"create podgroups"}},
		{name: "minCount of an existing one of ours set back",
			pod:      makePod("p0", job, inGroup(trainNative)),
			existing: []runtime.Object{nativePG(trainNative, 1, musterNativeLabels())},
			wantPG: func() *schedv1beta1.PodGroup {
				pg := nativePG(trainNative, 3, musterNativeLabels())
				return pg
			}(),
			wantWrites: []string{"update podgroups"}},
		{name: "a PodGroup of that name that is not ours: yield",
			pod:       makePod("p0", job, inGroup(trainNative)),
			existing:  []runtime.Object{nativePG(trainNative, 1, nil)},
			wantPG:    nativePG(trainNative, 1, nil),
			wantEvent: "GangManagedElsewhere"},
		{name: "a group muster would not name: yield",
			pod: makePod("p0", job, inGroup("theirs")), wantEvent: "GangManagedElsewhere"},
		{name: "broken definition: nothing made, the pod waits, said once",
			pod: makePod("b0", badJob, inGroup("bad-x")), wantEvent: "Warning GangUnknown"},
		{name: "default-scheduler pod not joined: nothing written, nothing said",
			pod: makePod("p0", job, onDefault)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorldWith(t, nativeOpts(), testDefs(trainerGang(3)), owners, roots, []*corev1.Pod{tc.pod}, nil, tc.existing...)
			w.clearActions()
			if err := w.ctrl.sync(w.ctx, "ns/"+tc.pod.Name); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if diff := cmp.Diff(tc.wantWrites, w.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			events := w.events()
			// The workload is told too when a gang cannot be computed.
			if tc.wantEvent == "" && len(events) > 0 || tc.wantEvent != "" && (len(events) == 0 || !strings.Contains(events[0], tc.wantEvent)) {
				t.Errorf("events = %q, want %q", events, tc.wantEvent)
			}
			got, err := w.kube.SchedulingV1beta1().PodGroups("ns").Get(w.ctx, trainNative, metav1.GetOptions{})
			if tc.wantPG == nil {
				if err == nil {
					t.Errorf("native PodGroup %s exists: %+v", trainNative, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantPG, got, cmpopts.IgnoreTypes(metav1.TypeMeta{}), cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields")); diff != "" {
				t.Errorf("native PodGroup (-want +got):\n%s", diff)
			}
			// A second sync of the same state, once the informer shows
			// it, writes nothing.
			err = wait.PollUntilContextTimeout(w.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				c, err := w.ctrl.native.lister.PodGroups("ns").Get(trainNative)
				return err == nil && c.Spec.SchedulingPolicy.Gang.MinCount == got.Spec.SchedulingPolicy.Gang.MinCount, nil
			})
			if err != nil {
				t.Fatalf("the native PodGroup informer did not catch up: %v", err)
			}
			w.clearActions()
			if err := w.ctrl.sync(w.ctx, "ns/"+tc.pod.Name); err != nil {
				t.Fatal(err)
			}
			if writes := w.writes(); len(writes) > 0 {
				t.Errorf("second sync wrote %v", writes)
			}
		})
	}
}

func TestSyncNativeKeepsOldGangsOnSchedulerPlugins(t *testing.T) {
	// A muster-scheduler pod that the webhook left ungrouped (its gang
	// predates native mode) is grouped the old way: label and
	// scheduler-plugins PodGroup, no native PodGroup.
	owners := []*obj{pipeline, trainer, job}
	w := newWorldWith(t, nativeOpts(), testDefs(trainerGang(3)), owners, owners, []*corev1.Pod{makePod("p0", job)}, nil)
	if err := w.ctrl.sync(w.ctx, "ns/p0"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"patch pods", "create podgroups"}, w.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if _, err := w.kube.SchedulingV1beta1().PodGroups("ns").Get(w.ctx, trainNative, metav1.GetOptions{}); err == nil {
		t.Error("a native PodGroup was made for a gang on scheduler-plugins")
	}
}

func TestDeletedNativePodGroupRequeuesItsMembers(t *testing.T) {
	owners := []*obj{pipeline, trainer, job}
	pods := []*corev1.Pod{makePod("p0", job, inGroup(trainNative)), makePod("p1", job, inGroup(trainNative)), makePod("other", job, inGroup("x"))}
	w := newWorldWith(t, nativeOpts(), testDefs(trainerGang(3)), owners, owners, pods, nil)
	for w.ctrl.queue.Len() > 0 {
		k, _ := w.ctrl.queue.Get()
		w.ctrl.queue.Done(k)
	}
	pg := nativePG(trainNative, 3, musterNativeLabels())
	w.ctrl.deleteNativePodGroup(pg)
	if got := w.ctrl.queue.Len(); got != 2 {
		t.Errorf("queued %d pods, want the 2 members", got)
	}
	// Someone else's PodGroup is not ours to remake.
	w.ctrl.deleteNativePodGroup(nativePG("x", 1, nil))
	if got := w.ctrl.queue.Len(); got != 2 {
		t.Errorf("queued %d pods after a foreign delete, want 2", got)
	}
}

func TestWebhookHandler(t *testing.T) {
	owners := []*obj{pipeline, trainer, job, brokenW, badJob}
	w := newWorldWith(t, nativeOpts(), testDefs(trainerGang(3)), owners, owners, nil, nil)
	srv := httptest.NewServer(w.ctrl.WebhookHandler())
	t.Cleanup(srv.Close)
	post := func(t *testing.T, pod *corev1.Pod, op admissionv1.Operation) *admissionv1.AdmissionResponse {
		t.Helper()
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		pod.Namespace = "" // as a create through the namespace's endpoint
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: types.UID("req-1"), Operation: op, Namespace: "ns",
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}},
		}
		body, err := json.Marshal(review)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(srv.URL+WebhookPath, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if out.Response == nil || out.Response.UID != "req-1" {
			t.Fatalf("response = %+v, want one for req-1", out.Response)
		}
		return out.Response
	}
	t.Run("member joined by a JSON patch", func(t *testing.T) {
		r := post(t, asCreated(makePod("p0", job)), admissionv1.Create)
		want := `[{"op":"add","path":"/spec/schedulingGroup","value":{"podGroupName":"` + trainNative + `"}}]`
		if !r.Allowed || string(r.Patch) != want || r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Errorf("response = allowed %v patch %s, want allowed with %s", r.Allowed, r.Patch, want)
		}
	})
	t.Run("broken definition refused with the cause", func(t *testing.T) {
		r := post(t, asCreated(makePod("b0", badJob)), admissionv1.Create)
		if r.Allowed || r.Result == nil || r.Result.Code != http.StatusForbidden || !strings.Contains(r.Result.Message, "is invalid") {
			t.Errorf("response = %+v, want refused with the definition's error", r)
		}
	})
	t.Run("updates are not looked at", func(t *testing.T) {
		if r := post(t, makePod("b0", badJob), admissionv1.Update); !r.Allowed || r.Patch != nil {
			t.Errorf("response = %+v, want allowed unchanged", r)
		}
	})
	t.Run("malformed review is a bad request", func(t *testing.T) {
		resp, err := http.Post(srv.URL+WebhookPath, "application/json", strings.NewReader("{"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status = %d, want 400", resp.StatusCode)
		}
	})
}
