package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/muster-io/muster/api"
)

// These tests run the live commands against fake clients: enough to pin
// the rendering and the owner-chain, PodGroup and event logic. The real
// apiserver path is covered by test/e2e/cli_test.go.

type servedKind struct {
	gvk        schema.GroupVersionKind
	namespaced bool
}

var fakeKinds = []servedKind{
	{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, true},
	{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true},
	{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, true},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, true},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, true},
	{schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}, true},
	{schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}, true},
	{schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"}, true},
}

// fakeCluster serves fakeKinds; unstructured objects go to the dynamic
// client, pods and events to the typed one.
func fakeCluster(t *testing.T, dyn []*unstructured.Unstructured, typed ...runtime.Object) *Cluster {
	t.Helper()
	var gvs []schema.GroupVersion
	for _, k := range fakeKinds {
		gvs = append(gvs, k.gvk.GroupVersion())
	}
	mapper := meta.NewDefaultRESTMapper(gvs)
	listKinds := map[schema.GroupVersionResource]string{}
	for _, k := range fakeKinds {
		scope := meta.RESTScopeRoot
		if k.namespaced {
			scope = meta.RESTScopeNamespace
		}
		mapper.Add(k.gvk, scope)
		plural, _ := meta.UnsafeGuessKindToResource(k.gvk)
		listKinds[plural] = k.gvk.Kind + "List"
	}
	objs := make([]runtime.Object, len(dyn))
	for i, o := range dyn {
		objs[i] = o
	}
	return &Cluster{
		Mapper:    mapper,
		Dynamic:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...),
		Kube:      kubefake.NewClientset(typed...),
		Namespace: "default",
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(path, data, true)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// jobsetCluster is the catalog's JobSet fixture as a cluster would hold it
// a few minutes after creation: the leader and one worker bound and ready,
// the other worker pending with the scheduler's message, one PodGroup.
func jobsetCluster(t *testing.T, pgPhase string) *Cluster {
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "jobset")
	root := readObjects(t, filepath.Join(dir, "object.yaml"))[0]
	root.SetCreationTimestamp(metav1.NewTime(fixedNow.Add(-5 * time.Minute)))
	dyn := append([]*unstructured.Unstructured{root}, readObjects(t, filepath.Join(dir, "children.yaml"))...)
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{
			"name": "llama-ft", "namespace": "train",
			"labels":          map[string]any{api.LabelWorkloadName: "llama-ft", api.LabelWorkloadKind: "JobSet", api.LabelDefinition: "jobset"},
			"ownerReferences": []any{map[string]any{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "llama-ft", "uid": string(root.GetUID()), "controller": true}},
		},
		"spec":   map[string]any{"minMember": int64(3), "minResources": map[string]any{"nvidia.com/gpu": "12"}},
		"status": map[string]any{"phase": pgPhase},
	}}
	dyn = append(dyn, pg)

	var typed []runtime.Object
	for i, u := range readObjects(t, filepath.Join(dir, "pods.yaml")) {
		p, err := toPod(u)
		if err != nil {
			t.Fatal(err)
		}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[api.LabelPodGroup] = "llama-ft"
		if i < 2 && pgPhase != "Pending" || i == 0 {
			p.Spec.NodeName = []string{"gpu-node-1", "gpu-node-2", "gpu-node-3"}[i]
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		} else {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "gang llama-ft needs 12 nvidia.com/gpu on 3 nodes; best placement fits 2 of 3 members"}}
		}
		typed = append(typed, p)
	}
	// A pod of another workload in the same namespace must not show up.
	typed = append(typed, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "train", UID: "u-1"}})
	typed = append(typed, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "ev1", Namespace: "train"},
		InvolvedObject: corev1.ObjectReference{Kind: "PodGroup", Name: "llama-ft"},
		Reason:         "FailedScheduling", Message: "old message", LastTimestamp: metav1.NewTime(fixedNow.Add(-time.Minute)),
	})
	return fakeCluster(t, dyn, typed...)
}

func TestDescribeLiveGolden(t *testing.T) {
	for _, tc := range []struct {
		name, phase string
	}{
		{"running", "Running"},
		{"pending", "Pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := jobsetCluster(t, tc.phase)
			res := run(t, c, "", "describe", "jobset/llama-ft", "-n", "train", "--color", "never")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			golden(t, "describe/live-jobset-"+tc.name+".txt", res.stdout)
			res = run(t, c, "", "describe", "jobsets", "llama-ft", "-n", "train", "-o", "json")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			golden(t, "describe/live-jobset-"+tc.name+".json", res.stdout)
			var d Description
			if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
				t.Fatal(err)
			}
			if d.Totals.GPUs != 12 || d.Totals.ObservedPods != 3 || len(d.Gangs) != 1 || d.Gangs[0].Name != "llama-ft" || d.Age != "5m" {
				t.Errorf("got gpus=%d observed=%d gangs=%+v age=%q; want 12, 3 (not the unrelated pod), one gang llama-ft, 5m", d.Totals.GPUs, d.Totals.ObservedPods, d.Gangs, d.Age)
			}
			g := d.Gangs[0]
			if tc.phase == "Pending" && !strings.Contains(g.Reason, "best placement fits 2 of 3") {
				t.Errorf("pending gang reason = %q; want the scheduler's message", g.Reason)
			}
			if tc.phase == "Running" && (g.Reason != "" || g.Bound != 2) {
				// 2 of 3 bound with phase Running from the PodGroup: the
				// reason still shows since bound < minMember.
				if g.Bound != 2 {
					t.Errorf("bound = %d, want 2", g.Bound)
				}
			}
		})
	}
}

func TestGetGolden(t *testing.T) {
	c := jobsetCluster(t, "Running")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"all-types", []string{"get", "-n", "train"}},
		{"jobsets-wide", []string{"get", "jobsets", "-A", "-o", "wide"}},
		{"json", []string{"get", "--all-types", "-n", "train", "-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, c, "", append(tc.args, "--color", "never")...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			golden(t, "get/"+tc.name+".txt", res.stdout)
		})
	}
	res := run(t, c, "", "get", "-n", "train", "-o", "json")
	var l WorkloadList
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Pods != 3 || l.Items[0].ReadyPods != 2 || l.Items[0].GPUs != 12 || l.Items[0].Gangs != 1 {
		t.Errorf("got %+v; want one JobSet with 2/3 pods ready, 12 GPUs, 1 gang", l.Items)
	}
}

// TestGetSkipsOwnedWorkloads: a JobSet controlled by a TrainJob (both
// defined) is not top-level; the TrainJob is listed instead.
func TestGetSkipsOwnedWorkloads(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "trainjob")
	var dyn []*unstructured.Unstructured
	dyn = append(dyn, readObjects(t, filepath.Join(dir, "object.yaml"))...)
	dyn = append(dyn, readObjects(t, filepath.Join(dir, "children.yaml"))...)
	c := fakeCluster(t, dyn)
	res := run(t, c, "", "get", "-A", "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var l WorkloadList
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range l.Items {
		kinds = append(kinds, r.Kind+"/"+r.Name)
	}
	if strings.Join(kinds, ",") != "TrainJob/llm-sft" {
		t.Errorf("listed %v; want only TrainJob/llm-sft", kinds)
	}
}

// TestGetSkipsPodsOfDefinedWorkloads: a Deployment's pods sit below a
// ReplicaSet, which has no definition; they still belong to the Deployment
// and are not listed as workloads of their own.
func TestGetSkipsPodsOfDefinedWorkloads(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "deployment")
	var dyn []*unstructured.Unstructured
	var typed []runtime.Object
	for _, f := range []string{"object.yaml", "children.yaml", "pods.yaml"} {
		dyn = append(dyn, readObjects(t, filepath.Join(dir, f))...)
	}
	for _, u := range readObjects(t, filepath.Join(dir, "pods.yaml")) {
		p, err := toPod(u)
		if err != nil {
			t.Fatal(err)
		}
		typed = append(typed, p)
	}
	c := fakeCluster(t, dyn, typed...)
	res := run(t, c, "", "get", "-A", "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var l WorkloadList
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range l.Items {
		kinds = append(kinds, r.Kind+"/"+r.Name)
	}
	if len(kinds) != 1 || !strings.HasPrefix(kinds[0], "Deployment/") {
		t.Errorf("listed %v; want only the Deployment", kinds)
	}
	if len(l.Items) == 1 && l.Items[0].Pods == 0 {
		t.Errorf("the Deployment shows no pods: %+v", l.Items[0])
	}
}

func TestLiveErrors(t *testing.T) {
	c := jobsetCluster(t, "Running")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"typo suggests", []string{"describe", "jobsett/x"}, ExitNotFound, `did you mean "jobset"`},
		{"missing workload", []string{"describe", "jobset/nope", "-n", "train"}, ExitNotFound, `"nope" not found in namespace "train"`},
		{"no definition", []string{"describe", "configmap/x"}, ExitNoDefinition, "no definition for ConfigMap"},
		{"get unknown type", []string{"get", "jobsett"}, ExitNotFound, `did you mean "jobset"`},
		{"no name", []string{"describe", "jobset"}, ExitUsage, "needs a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, c, "", tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.contains) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", res.code, res.stderr, tc.code, tc.contains)
			}
			if strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 || !strings.HasPrefix(res.stderr, "error: ") {
				t.Errorf("stderr is not one \"error: …\" line: %q", res.stderr)
			}
		})
	}
}

// TestGetNothingTopLevel: Jobs that all belong to a JobSet are not
// top-level workloads; get says so instead of a bare "none".
func TestGetNothingTopLevel(t *testing.T) {
	c := jobsetCluster(t, "Running")
	res := run(t, c, "", "get", "jobs", "-n", "train")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{"No top-level workloads found in namespace train.", "jobs in namespace train belong to other workloads", "muster describe job/NAME"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr %q lacks %q", res.stderr, want)
		}
	}
}
