package cli

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/muster-io/muster/api"
)

// The native PodGroup of the JobSet fixture (catalog/testdata/jobset):
// naming.NativePodGroupName of llama-ft with its UID.
const (
	nativeFixturePG  = "llama-ft-15e70000"
	nativeFixtureUID = "15e70000-0000-4000-8000-000000000001"
)

var nativePodGroupGVK = schema.GroupVersionKind{Group: "scheduling.k8s.io", Version: "v1beta1", Kind: "PodGroup"}

// nativeFixture is the JobSet fixture in native mode: a native PodGroup
// (unless noPG), and the fixture's three pods naming it.
type nativeFixture struct {
	noPG     bool
	minCount int32
	basic    bool
	cond     *metav1.Condition
	// pods of the fixture that exist (0: all three), the first bound of
	// them on a node, the first ready of those ready.
	pods, bound, ready int
	// podMsg is the PodScheduled=False message of the pending pods.
	podMsg string
	// events are FailedScheduling events: pod index → message, the later
	// index the newer.
	events map[int]string
	// notServed: discovery does not know the native kind.
	notServed bool
	// listErr answers the native list.
	listErr error
	// label also labels the pods for a scheduler-plugins PodGroup.
	label bool
}

func nativeCluster(t *testing.T, f nativeFixture) *Cluster {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "jobset")
	root := readObjects(t, filepath.Join(dir, "object.yaml"))[0]
	if string(root.GetUID()) != nativeFixtureUID {
		t.Fatalf("fixture UID %s; the test expects %s", root.GetUID(), nativeFixtureUID)
	}
	root.SetCreationTimestamp(metav1.NewTime(fixedNow.Add(-5 * time.Minute)))
	dyn := append([]*unstructured.Unstructured{root}, readObjects(t, filepath.Join(dir, "children.yaml"))...)
	var typed []runtime.Object
	if !f.noPG {
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: nativeFixturePG, Namespace: "train", Labels: map[string]string{
				api.LabelWorkloadKind: "JobSet", api.LabelWorkloadName: "llama-ft", api.LabelWorkloadUID: nativeFixtureUID, api.LabelDefinition: "jobset"}},
			Spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: "high", Priority: ptrInt32(1000)},
		}
		if !f.basic {
			pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: max(f.minCount, 3)}
		} else {
			pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
		}
		if f.cond != nil {
			pg.Status.Conditions = []metav1.Condition{*f.cond}
		}
		typed = append(typed, pg)
	}
	n := f.pods
	if n == 0 {
		n = 3
	}
	for i, u := range readObjects(t, filepath.Join(dir, "pods.yaml"))[:n] {
		p, err := toPod(u)
		if err != nil {
			t.Fatal(err)
		}
		p.Spec.SchedulerName = "default-scheduler"
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptrString(nativeFixturePG)}
		if f.label {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[api.LabelPodGroup] = "llama-ft"
		}
		switch {
		case i < f.bound:
			p.Spec.NodeName = []string{"gpu-node-1", "gpu-node-2", "gpu-node-3"}[i]
			p.Status.Phase = corev1.PodRunning
			ready := corev1.ConditionFalse
			if i < f.ready {
				ready = corev1.ConditionTrue
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		case f.podMsg != "":
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: f.podMsg}}
		default:
			p.Status.Phase = corev1.PodPending
		}
		if msg, ok := f.events[i]; ok {
			typed = append(typed, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "ev-" + p.Name, Namespace: "train"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: p.Name},
				Reason:         "FailedScheduling", Message: msg, LastTimestamp: metav1.NewTime(fixedNow.Add(time.Duration(i-10) * time.Second)),
			})
		}
		typed = append(typed, p)
	}
	c := fakeCluster(t, dyn, typed...)
	if !f.notServed {
		c.Mapper.(*meta.DefaultRESTMapper).Add(nativePodGroupGVK, meta.RESTScopeNamespace)
	}
	if f.listErr != nil {
		c.Kube.(*kubefake.Clientset).PrependReactor("list", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, f.listErr
		})
	}
	return c
}

func ptrInt32(v int32) *int32    { return &v }
func ptrString(v string) *string { return &v }

func describeNative(t *testing.T, c *Cluster) *Description {
	t.Helper()
	res := run(t, c, "", "describe", "jobset/llama-ft", "-n", "train", "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var d Description
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

var (
	unschedulableCond = &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
		Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}
	scheduledCond = &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"}
)

// TestDescribeNative: the native PodGroup of the gang, its members
// scheduled and ready counted from the pods, and while it is short of its
// quorum the scheduler's reason.
func TestDescribeNative(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    nativeFixture
		// want: phase, bound, members, summary; reason a substring of the
		// reason ("" = none), notReason must not be in it.
		phase, summary, reason, notReason string
		found                             bool
		minMember                         int32
	}{
		{name: "scheduled", f: nativeFixture{cond: scheduledCond, bound: 3, ready: 2},
			phase: "Scheduled", summary: "3 of 3 members scheduled, 2 ready", found: true, minMember: 3},
		{name: "unschedulable: the condition, and the newest event of a member",
			f:     nativeFixture{cond: unschedulableCond, podMsg: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", events: map[int]string{0: "old words", 2: "newest words"}},
			phase: "Unschedulable", summary: "0 of 3 members scheduled, 0 ready", found: true, minMember: 3,
			reason: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.; newest FailedScheduling (pod llama-ft-workers-1-0-zp64g): newest words", notReason: "old words"},
		{name: "the event says what the condition says: said once",
			f:     nativeFixture{cond: unschedulableCond, events: map[int]string{1: unschedulableCond.Message}},
			phase: "Unschedulable", summary: "0 of 3 members scheduled, 0 ready", found: true, minMember: 3, reason: unschedulableCond.Message, notReason: "newest FailedScheduling"},
		{name: "no condition yet: the members' PodScheduled message",
			f:     nativeFixture{podMsg: "pod group is unschedulable"},
			phase: "Pending", summary: "0 of 3 members scheduled, 0 ready", found: true, minMember: 3, reason: "pod group is unschedulable"},
		{name: "fewer pods than minCount", f: nativeFixture{minCount: 4},
			phase: "Pending", summary: "0 of 4 members scheduled, 0 ready", found: true, minMember: 4, reason: "waiting for pods: 3 of 4 created"},
		{name: "PodGroup missing", f: nativeFixture{noPG: true},
			phase: "Pending", summary: "0 of 3 members scheduled, 0 ready", minMember: 3, reason: "native PodGroup " + nativeFixturePG + " not found"},
		{name: "basic policy: no gang", f: nativeFixture{basic: true, bound: 1, pods: 1},
			phase: "Bound", summary: "1 of 1 members scheduled, 0 ready", found: true, minMember: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := describeNative(t, nativeCluster(t, tc.f))
			if len(d.Gangs) != 1 {
				t.Fatalf("gangs %+v; want one", d.Gangs)
			}
			g := d.Gangs[0]
			nv := g.NativePodGroup
			if !g.Native || nv == nil || g.Name != nativeFixturePG || nv.APIVersion != "scheduling.k8s.io/v1beta1" {
				t.Fatalf("gang %+v; want native PodGroup %s", g, nativeFixturePG)
			}
			if g.Phase != tc.phase || nv.Summary != tc.summary || g.PodGroupFound != tc.found || g.MinMember != tc.minMember || nv.MinCount != tc.minMember {
				t.Errorf("phase %q, summary %q, found %v, minMember %d/%d; want %q, %q, %v, %d",
					g.Phase, nv.Summary, g.PodGroupFound, g.MinMember, nv.MinCount, tc.phase, tc.summary, tc.found, tc.minMember)
			}
			switch {
			case tc.reason == "" && g.Reason != "":
				t.Errorf("reason %q; want none", g.Reason)
			case !strings.Contains(g.Reason, tc.reason), tc.notReason != "" && strings.Contains(g.Reason, tc.notReason):
				t.Errorf("reason %q; want %q in it and not %q", g.Reason, tc.reason, tc.notReason)
			}
			for _, w := range d.Warnings {
				// The scheduler holds a short gang's pods without a
				// condition: that is not "no scheduler looked at it".
				if strings.Contains(w, "has not looked at it") && (tc.f.noPG || tc.f.minCount > 3) {
					t.Errorf("warning %q for pods the scheduler holds", w)
				}
			}
			for _, c := range d.Components {
				for _, in := range c.Instances {
					for _, p := range in.Items {
						if p.Gang != nativeFixturePG {
							t.Errorf("pod %s: gang %q; want %s", p.Name, p.Gang, nativeFixturePG)
						}
					}
				}
			}
		})
	}
}

// TestDescribeNativeDetails: what only the JSON has, and the PodGroup of a
// gang none of whose pods exists yet.
func TestDescribeNativeDetails(t *testing.T) {
	d := describeNative(t, nativeCluster(t, nativeFixture{cond: unschedulableCond, events: map[int]string{2: "newest words"}}))
	nv := d.Gangs[0].NativePodGroup
	if c := nv.InitiallyScheduled; c == nil || c.Reason != "Unschedulable" || c.Status != "False" || c.Message != unschedulableCond.Message {
		t.Errorf("initiallyScheduled %+v; want the condition", c)
	}
	if ev := nv.LastFailedScheduling; ev == nil || ev.Message != "newest words" || ev.Pod != "llama-ft-workers-1-0-zp64g" || ev.Time != "2026-03-01T11:59:52Z" {
		t.Errorf("lastFailedScheduling %+v; want newest words on llama-ft-workers-1-0-zp64g at 11:59:52", ev)
	}
	if g := d.Gangs[0]; g.Priority == nil || *g.Priority != 1000 || g.PriorityClass != "high" || nv.Policy != "gang" {
		t.Errorf("gang %+v, %+v; want priority 1000 (high), policy gang", g, nv)
	}
}

// TestDescribeNativeOnlyByLabel: no pod exists yet; the PodGroup is found
// by the workload-uid label, the gang waits for its pods.
func TestDescribeNativeOnlyByLabel(t *testing.T) {
	c := nativeCluster(t, nativeFixture{})
	for _, name := range []string{"llama-ft-leader-0-0-g5q9r", "llama-ft-workers-0-0-knqbr", "llama-ft-workers-1-0-zp64g"} {
		if err := c.Kube.CoreV1().Pods("train").Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := describeNative(t, c)
	if len(d.Gangs) != 1 || !d.Gangs[0].Native || d.Gangs[0].Name != nativeFixturePG || d.Gangs[0].Reason != "waiting for pods: 0 of 3 created" {
		t.Errorf("gangs %+v; want the native PodGroup waiting for its 3 pods", d.Gangs)
	}
}

// TestDescribeNativeSplit: a gang with members in both APIs says so.
func TestDescribeNativeSplit(t *testing.T) {
	c := nativeCluster(t, nativeFixture{})
	p, err := c.Kube.CoreV1().Pods("train").Get(t.Context(), "llama-ft-leader-0-0-g5q9r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.SchedulingGroup = nil
	p.Labels[api.LabelPodGroup] = "llama-ft"
	if _, err := c.Kube.CoreV1().Pods("train").Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := describeNative(t, c)
	if !strings.Contains(strings.Join(d.Warnings, "\n"), "is split: 2 pods name a native PodGroup (spec.schedulingGroup), 1 are in a scheduler-plugins PodGroup") {
		t.Errorf("warnings %q; want the split", d.Warnings)
	}
}

// TestDescribeNativeNotServed: where the cluster does not serve the
// native API (discovery, or NotFound from the server) describe shows what
// it shows without native gangs, with no warning; a list that fails
// otherwise is a warning.
func TestDescribeNativeNotServed(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "podgroups"}, "")
	// Labelled too: a gang the scheduler-plugins PodGroup llama-ft holds
	// where native gangs are not.
	base := describeNative(t, nativeCluster(t, nativeFixture{label: true, notServed: true}))
	if len(base.Gangs) != 1 || base.Gangs[0].Native || base.Gangs[0].Name != "llama-ft" || strings.Contains(strings.Join(base.Warnings, "\n"), "native") {
		t.Fatalf("not served: gangs %+v, warnings %q; want the scheduler-plugins gang llama-ft alone, no word of native PodGroups", base.Gangs, base.Warnings)
	}
	want, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(describeNative(t, nativeCluster(t, nativeFixture{label: true, listErr: notFound})))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("NotFound from the server:\n%s\nwant what discovery without the kind gives:\n%s", got, want)
	}

	d := describeNative(t, nativeCluster(t, nativeFixture{label: true, listErr: apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "podgroups"}, "", errors.New("no"))}))
	if len(d.Gangs) != 1 || d.Gangs[0].Native || !strings.Contains(strings.Join(d.Warnings, "\n"), "list native PodGroups (scheduling.k8s.io/v1beta1)") {
		t.Errorf("forbidden: gangs %+v, warnings %q; want the gang as without native gangs and a warning", d.Gangs, d.Warnings)
	}
}

// TestDescribeNativeGolden pins the table and JSON of a pending native
// gang and of a scheduled one.
func TestDescribeNativeGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    nativeFixture
	}{
		{"pending", nativeFixture{cond: unschedulableCond, podMsg: unschedulableCond.Message, events: map[int]string{2: "0/3 nodes are available: 3 node(s) didn't match pod's node affinity/selector."}}},
		{"scheduled", nativeFixture{cond: scheduledCond, bound: 3, ready: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nativeCluster(t, tc.f)
			res := run(t, c, "", "describe", "jobset/llama-ft", "-n", "train", "--color", "never")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			golden(t, "describe/live-native-"+tc.name+".txt", res.stdout)
			res = run(t, c, "", "describe", "jobset/llama-ft", "-n", "train", "-o", "json")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			golden(t, "describe/live-native-"+tc.name+".json", res.stdout)
		})
	}
}

// TestGetNative: get counts a native gang as a gang, bound when minCount
// members are scheduled, unschedulable by its condition.
func TestGetNative(t *testing.T) {
	for _, tc := range []struct {
		name                string
		f                   nativeFixture
		gangs, bound, unsch int
		native              int
	}{
		{"scheduled", nativeFixture{cond: scheduledCond, bound: 3, ready: 3}, 1, 1, 0, 1},
		{"unschedulable", nativeFixture{cond: unschedulableCond}, 1, 0, 1, 1},
		{"basic policy: no gang", nativeFixture{basic: true, bound: 3}, 1, 0, 0, 0},
		{"not served", nativeFixture{notServed: true, bound: 3}, 1, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, nativeCluster(t, tc.f), "", "get", "jobsets", "-n", "train", "-o", "json")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			var l WorkloadList
			if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Items) != 1 {
				t.Fatalf("rows %+v; want one", l.Items)
			}
			r := l.Items[0]
			if r.Gangs != tc.gangs || r.GangsBound != tc.bound || r.GangsUnschedulable != tc.unsch || r.NativeGangs != tc.native {
				t.Errorf("gangs %d, bound %d, unschedulable %d, native %d; want %d, %d, %d, %d",
					r.Gangs, r.GangsBound, r.GangsUnschedulable, r.NativeGangs, tc.gangs, tc.bound, tc.unsch, tc.native)
			}
			if tc.native > 0 && (r.Priority == nil || *r.Priority != 1000) {
				t.Errorf("priority %v; want the native PodGroup's 1000", r.Priority)
			}
		})
	}
}
