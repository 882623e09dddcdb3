package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/api"
)

// elasticCluster holds, in namespace team-a:
//   - Job "train" (parallelism 3, muster.io/min-member 2) and its PodGroup
//     "train" (minMember 2, priority 1000 of class "high"), two pods bound
//     and one pending: an elastic gang, quorum bound, the extra not;
//   - a bare pod "bare", bound and ready;
//   - a pod "leader" and a pod "worker" it controls (as a leader pod owns
//     its workers through a set it controls), both bound.
func elasticCluster(t *testing.T) *Cluster {
	t.Helper()
	created := metav1.NewTime(fixedNow.Add(-10 * time.Minute))
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "train", "namespace": "team-a", "uid": "job-uid",
			"annotations": map[string]any{api.AnnotationMinMember: "2"}},
		"spec": map[string]any{"parallelism": int64(3), "completions": int64(3), "completionMode": "Indexed",
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x",
				"resources": map[string]any{"requests": map[string]any{"nvidia.com/gpu": "1"}}}}}}},
	}}
	job.SetCreationTimestamp(created)
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "train", "namespace": "team-a",
			"labels":          map[string]any{api.LabelWorkloadName: "train", api.LabelWorkloadKind: "Job", api.LabelDefinition: "job"},
			"annotations":     map[string]any{api.AnnotationPriority: "1000", api.AnnotationPriorityClass: "high"},
			"ownerReferences": []any{map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": true}}},
		"spec":   map[string]any{"minMember": int64(2)},
		"status": map[string]any{"phase": "Running"},
	}}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	pod := func(name, uid, node string, owner *metav1.OwnerReference, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID(uid), Labels: labels, CreationTimestamp: created},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Requests: gpu}}}},
		}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		if node != "" {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		} else {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available"}}
		}
		return p
	}
	jobRef := &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr(true)}
	inGang := func(i string) map[string]string {
		return map[string]string{api.LabelPodGroup: "train", "batch.kubernetes.io/job-completion-index": i, "batch.kubernetes.io/controller-uid": "job-uid"}
	}
	leaderRef := &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "leader", UID: "leader-uid", Controller: ptr(true)}
	pods := []*corev1.Pod{
		pod("train-0", "t0", "gpu-0", jobRef, inGang("0")),
		pod("train-1", "t1", "gpu-1", jobRef, inGang("1")),
		pod("train-2", "t2", "", jobRef, inGang("2")),
		pod("bare", "bare-uid", "gpu-2", nil, nil),
		pod("leader", "leader-uid", "gpu-3", nil, nil),
		pod("worker", "worker-uid", "gpu-4", leaderRef, nil),
	}
	var typed []runtime.Object
	dyn := []*unstructured.Unstructured{job, pg}
	for _, p := range pods {
		typed = append(typed, p)
		// Pods are read as workloads through the dynamic client too.
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		dyn = append(dyn, u)
	}
	return fakeCluster(t, dyn, typed...)
}

func ptr[T any](v T) *T { return &v }

// runJSON runs muster with args and decodes its stdout into a T, failing
// t on a non-zero exit.
func runJSON[T any](t *testing.T, c *Cluster, args ...string) T {
	t.Helper()
	var v T
	res := run(t, c, "", args...)
	if res.code != 0 {
		t.Fatalf("muster %s: exit %d: %s", strings.Join(args, " "), res.code, res.stderr)
	}
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		t.Fatalf("muster %s: %v", strings.Join(args, " "), err)
	}
	return v
}

// TestDescribeGangPriorityAndElastic: a PodGroup's priority annotations
// and an elastic gang's quorum and extras, in JSON and in the table, in the
// scheduler's GangElastic wording.
func TestDescribeGangPriorityAndElastic(t *testing.T) {
	c := elasticCluster(t)
	d := runJSON[Description](t, c, "describe", "job/train", "-n", "team-a", "-o", "json")
	if len(d.Gangs) != 1 {
		t.Fatalf("gangs %+v; want one", d.Gangs)
	}
	g := d.Gangs[0]
	if g.Priority == nil || *g.Priority != 1000 || g.PriorityClass != "high" {
		t.Errorf("priority %v class %q; want 1000, high", g.Priority, g.PriorityClass)
	}
	want := ElasticView{Quorum: 2, QuorumBound: 2, Extras: 1, ExtrasBound: 0}
	if g.Elastic == nil || *g.Elastic != want {
		t.Errorf("elastic %+v; want %+v", g.Elastic, want)
	}
	if g.Reason != "" {
		t.Errorf("reason %q; want none: the quorum is bound", g.Reason)
	}

	res := run(t, c, "", "describe", "job/train", "-n", "team-a", "--color", "never")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "describe/live-job-elastic.txt", res.stdout)
	for _, s := range []string{"quorum 2/2 bound, extras 0/1 bound", "1000 (high)"} {
		if !strings.Contains(res.stdout, s) {
			t.Errorf("table lacks %q:\n%s", s, res.stdout)
		}
	}

	res = run(t, c, "", "get", "jobs", "-n", "team-a", "-o", "wide", "--color", "never")
	if res.code != 0 || !strings.Contains(res.stdout, "PRIORITY") || !strings.Contains(res.stdout, " 1000 ") {
		t.Errorf("get -o wide (exit %d, %s) lacks the priority:\n%s", res.code, res.stderr, res.stdout)
	}
}

// TestElasticOf: the split, and which gangs are not elastic.
func TestElasticOf(t *testing.T) {
	for _, tc := range []struct {
		min         int32
		pods, bound int
		want        string
	}{
		{2, 2, 2, ""}, // exactly the quorum
		{0, 3, 3, ""}, // no minMember known
		{2, 5, 0, "quorum 0/2 bound, extras 0/3 bound"},
		{2, 5, 1, "quorum 1/2 bound, extras 0/3 bound"},
		{2, 5, 3, "quorum 2/2 bound, extras 1/3 bound"},
		{2, 5, 5, "quorum 2/2 bound, extras 3/3 bound"},
	} {
		e := elasticOf(GangView{MinMember: tc.min, Pods: tc.pods, Bound: tc.bound})
		got := ""
		if e != nil {
			got = e.String()
		}
		if got != tc.want {
			t.Errorf("min %d, %d pods, %d bound: got %q, want %q", tc.min, tc.pods, tc.bound, got, tc.want)
		}
	}
}

// TestDescribePodViews: a bare pod is its own only pod and says so
// plainly; a pod that controls other pods (a leader) shows only itself.
func TestDescribePodViews(t *testing.T) {
	c := elasticCluster(t)
	for _, tc := range []struct {
		name, summary string
	}{
		{"bare", "1 pod, ready, on node gpu-2"},
		{"leader", "1 pod, ready, on node gpu-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := runJSON[Description](t, c, "describe", "pod/"+tc.name, "-n", "team-a", "-o", "json")
			var names []string
			for _, comp := range d.Components {
				for _, in := range comp.Instances {
					for _, p := range in.Items {
						names = append(names, p.Name)
					}
				}
			}
			if strings.Join(names, ",") != tc.name || d.Totals.ObservedPods != 1 || d.Totals.ReadyPods != 1 || d.Totals.BoundPods != 1 {
				t.Errorf("pods %v, totals %+v; want only %s, 1 found, ready and bound", names, d.Totals, tc.name)
			}
			res := run(t, c, "", "describe", "pod/"+tc.name, "-n", "team-a", "--color", "never")
			if !strings.Contains(res.stdout, "Pods:        "+tc.summary+"\n") {
				t.Errorf("table lacks Pods line %q:\n%s", tc.summary, res.stdout)
			}
			if strings.Contains(res.stdout, "worker") {
				t.Errorf("view of %s lists the worker pod:\n%s", tc.name, res.stdout)
			}
		})
	}
	l := runJSON[WorkloadList](t, c, "get", "pods", "-n", "team-a", "-o", "json")
	got := map[string]string{}
	for _, r := range l.Items {
		got[r.Name] = fmt.Sprintf("[%d,%d]", r.ReadyPods, r.Pods)
	}
	if got["bare"] != "[1,1]" || got["leader"] != "[1,1]" || len(got) != 2 {
		t.Errorf("get pods: %v; want bare and leader, each 1/1 ready (the worker belongs to the leader)", got)
	}
}

// TestDescribeOfflineMinMemberJob: a Job gang made by muster.io/min-member
// is one PodGroup named after the Job, as the pod-grouper names it.
func TestDescribeOfflineMinMemberJob(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "job.yaml")
	manifest := `apiVersion: batch/v1
kind: Job
metadata:
  name: allreduce
  annotations:
    muster.io/min-member: "4"
spec:
  parallelism: 4
  completions: 4
  completionMode: Indexed
  template:
    spec:
      containers:
      - name: c
        image: x
        resources:
          requests:
            nvidia.com/gpu: "2"
`
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	d := runJSON[Description](t, nil, "describe", "-f", path, "-o", "json")
	if len(d.Plans) != 1 || d.Plans[0].PodGroup != "allreduce" || d.Plans[0].MinMember != 4 {
		t.Errorf("plans %+v; want one, PodGroup allreduce, min-member 4", d.Plans)
	}
	res := run(t, nil, "", "describe", "-f", path, "--color", "never")
	if strings.Contains(res.stdout, "(one per key)") || !strings.Contains(res.stdout, "allreduce") {
		t.Errorf("gang plan does not name the PodGroup allreduce:\n%s", res.stdout)
	}
}

// TestDescribeMemberPodGang: one member of a gang described as a pod shows
// its gang counted over all its members, not as a gang of none.
func TestDescribeMemberPodGang(t *testing.T) {
	c := elasticCluster(t)
	d := runJSON[Description](t, c, "describe", "pod/train-0", "-n", "team-a", "-o", "json")
	if d.Totals.ObservedPods != 1 || len(d.Gangs) != 1 {
		t.Fatalf("totals %+v, gangs %+v; want the one pod and its gang", d.Totals, d.Gangs)
	}
	g := d.Gangs[0]
	want := ElasticView{Quorum: 2, QuorumBound: 2, Extras: 1, ExtrasBound: 0}
	if g.Name != "train" || g.Pods != 3 || g.Bound != 2 || g.Reason != "" || g.Elastic == nil || *g.Elastic != want {
		t.Errorf("gang %+v (elastic %+v); want train, 3 members, 2 bound, no reason, %+v", g, g.Elastic, want)
	}
	if p := d.Components[0].Instances[0].Items[0]; p.Gang != "train" {
		t.Errorf("pod %s in gang %q; want train", p.Name, p.Gang)
	}
}
