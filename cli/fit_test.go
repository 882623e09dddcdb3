package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/muster-io/muster/api"
)

// fitNode is one node of a fake cluster for fit: GPUs, GPUs already used by
// a running pod of another team, its zone, and what keeps pods away.
type fitNode struct {
	name, zone string
	gpus, used int64
	// taint is a NoSchedule taint key=value other than the GPU taint.
	taint    string
	cordoned bool
}

// fitCluster is a fake cluster of nodes as a GPU cloud labels and taints
// them: GPU nodes carry node-type=gpu and the nvidia.com/gpu:NoSchedule
// taint. dyn and extra go to fakeCluster as they are.
func fitCluster(t *testing.T, nodes []fitNode, dyn []*unstructured.Unstructured, extra ...runtime.Object) *Cluster {
	t.Helper()
	var typed []runtime.Object
	for _, n := range nodes {
		alloc := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("256"),
			corev1.ResourceMemory: resource.MustParse("2Ti"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		labels := map[string]string{"kubernetes.io/hostname": n.name, "topology.kubernetes.io/zone": n.zone}
		var taints []corev1.Taint
		if n.gpus > 0 {
			alloc["nvidia.com/gpu"] = *resource.NewQuantity(n.gpus, resource.DecimalSI)
			labels["node-type"] = "gpu"
			taints = append(taints, corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule})
		}
		if k, v, ok := strings.Cut(n.taint, "="); ok {
			taints = append(taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffectNoSchedule})
		}
		typed = append(typed, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
			Spec:       corev1.NodeSpec{Taints: taints, Unschedulable: n.cordoned},
			Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc},
		})
		if n.used > 0 {
			typed = append(typed, busyPod("busy-"+n.name, n.name, n.used, corev1.PodRunning))
		}
	}
	return fakeCluster(t, dyn, append(typed, extra...)...)
}

// busyPod is a pod of another team holding gpus GPUs on node.
func busyPod(name, node string, gpus int64, phase corev1.PodPhase) *corev1.Pod {
	q := corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "other", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: q, Limits: q}}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// clusterA has room for the 12-GPU gang in zone-a only: in zone-b one node
// is full, one half full, one tainted for another team and one cordoned.
// A node without GPUs and a finished pod that no longer holds GPUs are
// there to be ignored.
func clusterA(t *testing.T, dyn ...*unstructured.Unstructured) *Cluster {
	return fitCluster(t, []fitNode{
		{name: "a1", zone: "zone-a", gpus: 8, used: 4},
		{name: "a2", zone: "zone-a", gpus: 8},
		{name: "b1", zone: "zone-b", gpus: 8, used: 8},
		{name: "b2", zone: "zone-b", gpus: 8, used: 6},
		{name: "b3", zone: "zone-b", gpus: 8, taint: "dedicated=inference"},
		{name: "b4", zone: "zone-b", gpus: 8, cordoned: true},
		{name: "cpu1", zone: "zone-a"},
	}, dyn, busyPod("done", "a2", 8, corev1.PodSucceeded))
}

// clusterB fits the gang too, but leaves three nodes with GPUs partly
// allocated.
func clusterB(t *testing.T) *Cluster {
	return fitCluster(t, []fitNode{
		{name: "n1", zone: "zone-a", gpus: 8},
		{name: "n2", zone: "zone-a", gpus: 8, used: 2},
		{name: "n3", zone: "zone-a", gpus: 8, used: 2},
	}, nil)
}

// clusterC is too small.
func clusterC(t *testing.T) *Cluster {
	return fitCluster(t, []fitNode{
		{name: "lab1", zone: "lab", gpus: 4},
		{name: "lab2", zone: "lab", gpus: 4},
	}, nil)
}

func fitTestdata(name string) string { return filepath.Join("testdata", "fit", name) }

func decodeFit(t *testing.T, out string) *FitReport {
	t.Helper()
	var r FitReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("fit -o json is not a FitReport: %v\n%s", err, out)
	}
	return &r
}

func TestFitGolden(t *testing.T) {
	for _, tc := range []struct {
		name, file, output string
	}{
		{"train", "train.yaml", "table"},
		{"train-json", "train.yaml", "json"},
		{"too-big", "too-big.yaml", "table"},
		{"lws", "lws.yaml", "table"},
		{"many", "many.yaml", "table"},
		{"many-wide", "many.yaml", "wide"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, clusterA(t), "", "fit", "-f", fitTestdata(tc.file), "-o", tc.output, "--color", "never")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			ext := ".txt"
			if tc.output == "json" {
				ext = ".json"
			}
			golden(t, "fit/"+tc.name+ext, res.stdout)
		})
	}
}

// TestFitVerdicts pins what the golden files show, so a regenerated golden
// file cannot quietly change the answer.
func TestFitVerdicts(t *testing.T) {
	res := run(t, clusterA(t), "", "fit", "-f", fitTestdata("train.yaml"), "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	r := decodeFit(t, res.stdout)
	c := r.Clusters[0]
	if r.Preemption != "evaluated" || c.Verdict != "fits now" || !c.Fits || c.Nodes != 7 || c.BoundPods != 3 || c.GPUs != 48 || c.GPUsFree != 30 || c.GPUsFreeAfter != 18 ||
		c.PartialGPUNodes != 2 || c.PartialGPUNodesAfter != 1 {
		t.Errorf("cluster %+v; want fits, 7 nodes, 3 bound pods (not the finished one), 48 GPUs, 30 → 18 free, 2 → 1 partly used", c)
	}
	g := c.Workloads[0].Gangs[0]
	if g.Name != "train" || g.PodGroup != "train" || g.MinMember != 3 || !g.Fits || g.Topology == nil || g.Topology.Domain != "zone-a" || !g.Topology.Required {
		t.Errorf("gang %+v; want train, min-member 3, fits in zone-a (required)", g)
	}
	got := map[string]int{}
	for _, a := range g.Assignments {
		got[a.Node]++
		if a.GPUs != 4 {
			t.Errorf("member %s: %d GPUs, want 4 (the limit, defaulted into the request)", a.Pod, a.GPUs)
		}
	}
	// Best fit: the half-used a1 takes one member, a2 the other two.
	if got["a1"] != 1 || got["a2"] != 2 || len(got) != 2 {
		t.Errorf("members per node %v; want a1=1 a2=2", got)
	}

	res = run(t, clusterA(t), "", "fit", "-f", fitTestdata("too-big.yaml"), "-o", "json")
	r = decodeFit(t, res.stdout)
	g = r.Clusters[0].Workloads[0].Gangs[0]
	want := "gang team-a/pretrain: needs 40 nvidia.com/gpu for 5 members (8 per member); best placement fits 1 of 5 members"
	if r.Clusters[0].Fits || g.Fits || g.Verdict != "does not fit" || !strings.HasPrefix(g.Reason, want) || len(g.Assignments) != 0 {
		t.Errorf("too-big: fits %v, gang %+v; want does not fit, reason starting %q", r.Clusters[0].Fits, g, want)
	}
	if r.Clusters[0].GPUsFreeAfter != r.Clusters[0].GPUsFree {
		t.Errorf("a gang that does not fit changed the free GPUs: %d → %d", r.Clusters[0].GPUsFree, r.Clusters[0].GPUsFreeAfter)
	}
}

// TestFitNodeFilters: a member goes only where kube-scheduler's node
// filters let it, and the reason counts the nodes they reject.
func TestFitNodeFilters(t *testing.T) {
	nodes := []fitNode{
		{name: "a1", zone: "zone-a", gpus: 8},
		{name: "b1", zone: "zone-b", gpus: 8, taint: "dedicated=inference"},
		{name: "c1", zone: "zone-c", gpus: 8, cordoned: true},
		{name: "d1", zone: "zone-d", gpus: 8},
	}
	gpuTol := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name   string
		edit   func(*corev1.PodSpec)
		want   string // node chosen, or "" for no fit
		reason string
	}{
		{"GPU taint not tolerated", func(s *corev1.PodSpec) {}, "", "4 of 4 nodes rejected by other filters"},
		{"tolerated: first by name", func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{gpuTol} }, "a1", ""},
		{"node selector", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{gpuTol}
			s.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "zone-d"}
		}, "d1", ""},
		{"node affinity on a tainted zone", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{gpuTol}
			s.Affinity = zoneAffinity("zone-b")
		}, "", "4 of 4 nodes rejected by other filters"},
		{"node affinity, taint tolerated", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{gpuTol, {Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "inference", Effect: corev1.TaintEffectNoSchedule}}
			s.Affinity = zoneAffinity("zone-b")
		}, "b1", ""},
		{"cordoned node", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{gpuTol}
			s.Affinity = zoneAffinity("zone-c")
		}, "", "4 of 4 nodes rejected by other filters"},
		{"cordon tolerated", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{gpuTol, {Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			s.Affinity = zoneAffinity("zone-c")
		}, "c1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: "team-a", Annotations: map[string]string{api.AnnotationMinMember: "1"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}},
			}
			tc.edit(&pod.Spec)
			data, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			res := run(t, fitCluster(t, nodes, nil), string(data), "fit", "-f", "-", "-o", "json")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			r := decodeFit(t, res.stdout)
			gangs := r.Clusters[0].Workloads[0].Gangs
			if len(gangs) != 1 {
				t.Fatalf("gangs %+v; want the one muster.io/min-member makes", gangs)
			}
			g := gangs[0]
			node := ""
			if len(g.Assignments) == 1 {
				node = g.Assignments[0].Node
			}
			if node != tc.want || g.Fits != (tc.want != "") || !strings.Contains(g.Reason, tc.reason) {
				t.Errorf("placed on %q (fits %v, reason %q); want %q, reason containing %q", node, g.Fits, g.Reason, tc.want, tc.reason)
			}
		})
	}
}

func zoneAffinity(zone string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone},
		}}}},
	}}}
}

// withFitClusters makes fit's per-context clusters the given fakes (an
// absent name is an unreachable cluster) for the test.
func withFitClusters(t *testing.T, clusters map[string]*Cluster) {
	t.Helper()
	prev := fitClusterFor
	fitClusterFor = func(_ *Env, name string) (*Cluster, error) {
		if c, ok := clusters[name]; ok {
			return c, nil
		}
		return nil, unreachableErrorf("cluster unreachable: dial tcp 10.0.0.1:443: connect: connection refused")
	}
	t.Cleanup(func() { fitClusterFor = prev })
}

// TestFitRanksContexts: fits now first, then the fewest partly used GPU
// nodes after placement; an unreachable cluster last, with its error.
func TestFitRanksContexts(t *testing.T) {
	withFitClusters(t, map[string]*Cluster{"prod-a": clusterA(t), "prod-b": clusterB(t), "lab": clusterC(t)})
	args := []string{"fit", "-f", fitTestdata("train.yaml"), "--context", "lab", "--context", "down", "--context", "prod-b", "--context", "prod-a", "--color", "never"}
	res := run(t, nil, "", args...)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "fit/rank.txt", res.stdout)
	if !strings.Contains(res.stderr, "warning: context down: cluster unreachable") {
		t.Errorf("stderr %q; want a warning naming the unreachable context", res.stderr)
	}
	res = run(t, nil, "", append(args, "-o", "json")...)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "fit/rank.json", res.stdout)
	r := decodeFit(t, res.stdout)
	var order []string
	for _, c := range r.Clusters {
		order = append(order, fmt.Sprintf("%d:%s:%v:%d", c.Rank, c.Context, c.Fits, c.PartialGPUNodesAfter))
	}
	want := "1:prod-a:true:1 2:prod-b:true:3 3:lab:false:0 4:down:false:0"
	if strings.Join(order, " ") != want {
		t.Errorf("ranking %v; want %s", order, want)
	}
	if r.Clusters[3].Error == "" {
		t.Errorf("the unreachable context has no error: %+v", r.Clusters[3])
	}

	// Every context unreachable: the command fails as a single one would.
	res = run(t, nil, "", "fit", "-f", fitTestdata("train.yaml"), "--context", "x", "--context", "y")
	if res.code != ExitUnreachable || !strings.HasPrefix(res.stderr, "warning: context x") || !strings.Contains(res.stderr, "error: cluster unreachable") {
		t.Errorf("all unreachable: exit %d, stderr %q; want exit %d and the error", res.code, res.stderr, ExitUnreachable)
	}
}

// liveJobSet is train.yaml submitted: the pod-grouper made PodGroup train,
// the leader is bound to b2 (zone-b) and the two workers are pending.
func liveJobSet(t *testing.T, withPodGroup bool) *Cluster {
	return liveJobSetOn(t, withPodGroup, nil, []fitNode{
		{name: "a1", zone: "zone-a", gpus: 8},
		{name: "b2", zone: "zone-b", gpus: 8},
		{name: "b5", zone: "zone-b", gpus: 8, used: 4},
	})
}

// liveJobSetOn is liveJobSet on the given nodes, with pgAnnotations added
// to its PodGroup's and extra objects.
func liveJobSetOn(t *testing.T, withPodGroup bool, pgAnnotations map[string]any, nodes []fitNode, extra ...runtime.Object) *Cluster {
	root := readObjects(t, fitTestdata("train.yaml"))[0]
	root.SetUID("js-uid")
	dyn := []*unstructured.Unstructured{root}
	if withPodGroup {
		dyn = append(dyn, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{
				"name": "train", "namespace": "team-a",
				"labels":      map[string]any{api.LabelDefinition: "jobset"},
				"annotations": map[string]any{api.AnnotationTopologyRequired: "topology.kubernetes.io/zone"},
			},
			"spec": map[string]any{"minMember": int64(3)},
		}})
		for k, v := range pgAnnotations {
			if err := unstructured.SetNestedField(dyn[1].Object, v, "metadata", "annotations", k); err != nil {
				t.Fatal(err)
			}
		}
	}
	var pods []runtime.Object
	for i, name := range []string{"train-leader-0-0-abcde", "train-workers-0-0-fghij", "train-workers-1-0-klmno"} {
		q := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-" + name),
				Labels:          map[string]string{api.LabelPodGroup: "train"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "train", UID: "js-uid", Controller: ptrBool(true)}}},
			Spec: corev1.PodSpec{
				SchedulerName: "muster-scheduler",
				NodeSelector:  map[string]string{"node-type": "gpu"},
				Tolerations:   []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				Containers:    []corev1.Container{{Name: "trainer", Resources: corev1.ResourceRequirements{Requests: q, Limits: q}}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		if i == 0 {
			p.Spec.NodeName, p.Status.Phase = "b2", corev1.PodRunning
		}
		pods = append(pods, p)
	}
	return fitCluster(t, nodes, dyn, append(pods, extra...)...)
}

func ptrBool(b bool) *bool { return &b }

// TestFitLive: a submitted workload's bound leader stays where it is and
// pins the zone; the pending workers go to zone-b although zone-a has
// more room.
func TestFitLive(t *testing.T) {
	res := run(t, liveJobSet(t, true), "", "fit", "jobset/train", "-n", "team-a", "--color", "never")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "fit/live.txt", res.stdout)
	res = run(t, liveJobSet(t, true), "", "fit", "jobsets", "train", "-n", "team-a", "-o", "json")
	r := decodeFit(t, res.stdout)
	w := r.Clusters[0].Workloads[0]
	g := w.Gangs[0]
	got := map[string]int{}
	for _, a := range g.Assignments {
		got[a.Node]++
	}
	if w.Source != "live" || !g.Fits || g.Bound != 1 || g.Members != 3 || g.Topology.Domain != "zone-b" || got["b2"] != 1 || got["b5"] != 1 {
		t.Errorf("source %s, gang %+v, per node %v; want live, fits, 1 of 3 bound, zone-b, b2=1 b5=1", w.Source, g, got)
	}

	// Without its PodGroup the scheduler would not plan the gang: the
	// plugin's words.
	res = run(t, liveJobSet(t, false), "", "fit", "jobset/train", "-n", "team-a", "-o", "json")
	r = decodeFit(t, res.stdout)
	g = r.Clusters[0].Workloads[0].Gangs[0]
	if g.Fits || g.Reason != "PodGroup team-a/train not found" {
		t.Errorf("gang %+v; want does not fit, PodGroup team-a/train not found", g)
	}
}

func TestFitErrors(t *testing.T) {
	c := clusterA(t)
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"nothing to fit", []string{"fit"}, ExitUsage, "fit needs -f FILE or TYPE/NAME"},
		{"both", []string{"fit", "-f", "x.yaml", "jobset/x"}, ExitUsage, "not both"},
		{"no name", []string{"fit", "jobset"}, ExitUsage, "needs a name"},
		{"context twice", []string{"fit", "-f", "x.yaml", "--context", "a", "--context", "a"}, ExitUsage, "--context a given twice"},
		{"server and contexts", []string{"fit", "-f", "x.yaml", "--context", "a", "--context", "b", "--server", "https://x"}, ExitUsage, "--server names one cluster"},
		{"missing file", []string{"fit", "-f", "nope.yaml"}, ExitUsage, "cannot read nope.yaml"},
		{"no definition", []string{"fit", "-f", filepath.Join("testdata", "fit", "configmap.yaml")}, ExitNoDefinition, "no workload with a definition"},
		{"missing workload", []string{"fit", "jobset/nope", "-n", "team-a"}, ExitNotFound, `"nope" not found in namespace "team-a"`},
		{"typo", []string{"fit", "jobsett/x"}, ExitNotFound, `did you mean "jobset"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, c, "", tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.contains) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", res.code, res.stderr, tc.code, tc.contains)
			}
		})
	}
	res := run(t, nil, "", "fit", "-f", fitTestdata("train.yaml"), "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	if res.code != ExitUnreachable {
		t.Errorf("no kubeconfig: exit %d, stderr %q; want %d", res.code, res.stderr, ExitUnreachable)
	}
}

// TestFitHelp: --help states the RBAC fit needs and has examples.
func TestFitHelp(t *testing.T) {
	res := run(t, nil, "", "fit", "--help")
	for _, want := range []string{"RBAC, read-only: list nodes (cluster-wide) and list pods (all namespaces)", "priorityclasses,\n", "poddisruptionbudgets", "podgroups", "muster fit -f train.yaml --context prod-a --context prod-b", "--no-preemption", "fits after preempting", "--context stringArray"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("fit --help lacks %q:\n%s", want, res.stdout)
		}
	}
}

// TestFitSnapshotListsOnly: fit reads with list calls and writes nothing.
func TestFitSnapshotListsOnly(t *testing.T) {
	c := clusterA(t)
	res := run(t, c, "", "fit", "-f", fitTestdata("train.yaml"))
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var seen []string
	for _, a := range c.Kube.(*kubefake.Clientset).Actions() {
		seen = append(seen, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if strings.Join(seen, ",") != "list nodes,list pods" {
		t.Errorf("API calls %v; want list nodes, list pods", seen)
	}
}

// TestFitWaitsForMembers: a gang whose min-member is more than its pods is
// not planned by the plugin, which waits for the rest; fit says so in its
// words instead of a verdict.
func TestFitWaitsForMembers(t *testing.T) {
	job := `{"apiVersion": "batch/v1", "kind": "Job",
	 "metadata": {"name": "short", "namespace": "team-a", "annotations": {"muster.io/min-member": "4"}},
	 "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}`
	res := run(t, clusterA(t), job, "fit", "-f", "-", "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	g := decodeFit(t, res.stdout).Clusters[0].Workloads[0].Gangs[0]
	want := "waiting for members of gang team-a/short: 2 of 4 (minMember) exist"
	if g.Fits || g.Verdict != "not evaluated" || g.Reason != want {
		t.Errorf("gang %+v; want not evaluated, %q", g, want)
	}
}

// BenchmarkFit1000Nodes times `muster fit -f` on a cluster of 1000 nodes of
// 8 GPUs and 10,000 bound pods (fake clients: the list calls cost no
// network): the snapshot, the scheduler's node filters and the plan of a
// 64-member gang in one zone.
//
//	go test ./cli -run '^$' -bench Fit1000 -benchmem
func BenchmarkFit1000Nodes(b *testing.B) {
	var objs []runtime.Object
	for i := range 1000 {
		name := fmt.Sprintf("n%04d", i)
		alloc := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("1Ti"),
			corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8"),
		}
		objs = append(objs, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-type": "gpu", "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%4)}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
			Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc},
		})
		for j := range 10 {
			// Every node but every tenth one partly used: 10 pods of 0 or
			// 1 GPU.
			gpus := int64(0)
			if i%10 != 0 && j < 5 {
				gpus = 1
			}
			objs = append(objs, busyPod(fmt.Sprintf("p-%s-%d", name, j), name, gpus, corev1.PodRunning))
		}
	}
	// A mapper that serves nothing: -f needs no type, and no cluster Karta.
	c := &Cluster{Mapper: meta.NewDefaultRESTMapper(nil), Kube: kubefake.NewClientset(objs...), Namespace: "default"}
	job := `{"apiVersion": "batch/v1", "kind": "Job",
	 "metadata": {"name": "big", "namespace": "team-a", "annotations": {"muster.io/min-member": "64", "muster.io/topology-required": "topology.kubernetes.io/zone"}},
	 "spec": {"parallelism": 64, "completions": 64, "template": {"spec": {
	   "nodeSelector": {"node-type": "gpu"}, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
	   "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}}`
	b.ReportAllocs()
	for b.Loop() {
		res := run(b, c, job, "fit", "-f", "-", "-o", "json")
		if res.code != 0 {
			b.Fatalf("exit %d: %s", res.code, res.stderr)
		}
		var r FitReport
		if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
			b.Fatal(err)
		}
		if c := r.Clusters[0]; !c.Fits || c.Nodes != 1000 || c.BoundPods != 10000 {
			b.Fatalf("cluster %d nodes, %d bound pods, fits %v; want 1000, 10000, fits", c.Nodes, c.BoundPods, c.Fits)
		}
	}
}

// runningPod is a bound pod admitted at class pc (value prio), in gang
// (a muster PodGroup's label) unless gang is "".
func runningPod(ns, name, node, gang string, gpus int64, pc string, prio int32, age time.Duration) *corev1.Pod {
	p := busyPod(name, node, gpus, corev1.PodRunning)
	p.Namespace, p.UID = ns, types.UID("uid-"+ns+"-"+name)
	p.Spec.PriorityClassName, p.Spec.Priority = pc, &prio
	start := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).Add(-age))
	p.CreationTimestamp, p.Status.StartTime = start, &start
	if gang != "" {
		p.Labels = map[string]string{api.LabelPodGroup: gang}
	}
	return p
}

func fitPodGroup(ns, name string, minMember int64, prio string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{api.AnnotationPriority: prio}},
		"spec":     map[string]any{"minMember": minMember},
	}}
}

func priorityClass(name string, value int32, never, globalDefault bool) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: globalDefault}
	if never {
		pc.PreemptionPolicy = ptrTo(corev1.PreemptNever)
	}
	return pc
}

func ptrTo[T any](v T) *T { return &v }

// fullCluster has four 8-GPU nodes, every GPU taken:
//   - f1: gang team-b/low-a, 4 × 2 GPUs at "low" (10), an elastic gang of
//     quorum 3 (one extra);
//   - f2: gang team-b/low-b, 2 × 4 GPUs at "low";
//   - f3: gang team-b/mid, 2 × 4 GPUs at "mid" (500);
//   - f4: pod team-c/solo, 8 GPUs at "low", in no gang.
//
// Classes: low 10, mid 500, high 1000, polite 1000 with preemptionPolicy
// Never.
func fullCluster(t *testing.T, extra ...runtime.Object) *Cluster {
	var nodes []fitNode
	for i := range 4 {
		nodes = append(nodes, fitNode{name: fmt.Sprintf("f%d", i+1), zone: "zone-a", gpus: 8})
	}
	objs := []runtime.Object{
		priorityClass("low", 10, false, false), priorityClass("mid", 500, false, false),
		priorityClass("high", 1000, false, false), priorityClass("polite", 1000, true, false),
		runningPod("team-c", "solo", "f4", "", 8, "low", 10, time.Hour),
	}
	for i := range 4 {
		objs = append(objs, runningPod("team-b", fmt.Sprintf("low-a-%d", i), "f1", "low-a", 2, "low", 10, time.Duration(i+1)*time.Hour))
	}
	for i := range 2 {
		objs = append(objs, runningPod("team-b", fmt.Sprintf("low-b-%d", i), "f2", "low-b", 4, "low", 10, time.Hour),
			runningPod("team-b", fmt.Sprintf("mid-%d", i), "f3", "mid", 4, "mid", 500, time.Hour))
	}
	dyn := []*unstructured.Unstructured{fitPodGroup("team-b", "low-a", 3, "10"), fitPodGroup("team-b", "low-b", 2, "10"), fitPodGroup("team-b", "mid", 2, "500")}
	return fitCluster(t, nodes, dyn, append(objs, extra...)...)
}

// urgentFile is urgent.yaml with its pods at class pc.
func urgentFile(t *testing.T, pc string) string {
	t.Helper()
	data, err := os.ReadFile(fitTestdata("urgent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "urgent.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "priorityClassName: high", "priorityClassName: "+pc)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFitPreempts: on a full cluster the high-priority gang fits after
// preempting the cheapest whole units by the plugin's order (a lone pod
// before a gang; of two gangs at one priority the one with fewer pods),
// and the placement is the one on the room they leave.
func TestFitPreempts(t *testing.T) {
	res := run(t, fullCluster(t), "", "fit", "-f", fitTestdata("urgent.yaml"), "--color", "never")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "fit/preempt.txt", res.stdout)
	res = run(t, fullCluster(t), "", "fit", "-f", fitTestdata("urgent.yaml"), "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "fit/preempt.json", res.stdout)
	r := decodeFit(t, res.stdout)
	c := r.Clusters[0]
	if c.Verdict != "fits after preempting" || c.Fits || !c.FitsAfterPreempting || c.VictimUnits != 2 || c.VictimPods != 3 || c.VictimGPUs != 16 {
		t.Errorf("cluster verdict %q fits %v after-preempting %v, victims %d units %d pods %d GPUs; want fits after preempting 2 units, 3 pods, 16 GPUs",
			c.Verdict, c.Fits, c.FitsAfterPreempting, c.VictimUnits, c.VictimPods, c.VictimGPUs)
	}
	g := c.Workloads[0].Gangs[0]
	var victims []string
	for _, v := range g.Victims {
		victims = append(victims, fmt.Sprintf("%s %s/%s %d pods %d GPUs prio %d on %s", v.Kind, v.Namespace, v.Name, v.Pods, v.GPUs, v.Priority, strings.Join(v.Nodes, ",")))
	}
	want := "pod team-c/solo 1 pods 8 GPUs prio 10 on f4; gang team-b/low-b 2 pods 8 GPUs prio 10 on f2"
	if strings.Join(victims, "; ") != want {
		t.Errorf("victims %q; want %q", strings.Join(victims, "; "), want)
	}
	if g.Priority == nil || *g.Priority != 1000 || g.PriorityClass != "high" || g.Verdict != "fits after preempting" || g.Fits || !g.FitsAfterPreempting {
		t.Errorf("gang %+v; want priority 1000 (high), fits after preempting", g)
	}
	if !strings.HasPrefix(g.Reason, "gang team-a/urgent: needs 12 nvidia.com/gpu") {
		t.Errorf("reason %q; want why it does not fit now", g.Reason)
	}
	if got := fitNodeCounts(g); got != "f2=2,f4=1" && got != "f2=1,f4=2" {
		t.Errorf("members per node %s; want the three members on f2 and f4, where the victims were", got)
	}
	if c.GPUsFree != 0 || c.GPUsFreeAfter != 4 {
		t.Errorf("GPUs free %d → %d; want 0 → 4 (16 freed, 12 taken)", c.GPUsFree, c.GPUsFreeAfter)
	}
}

func fitNodeCounts(g GangFit) string {
	var parts []string
	for _, n := range g.Nodes {
		parts = append(parts, fmt.Sprintf("%s=%d", n.Name, len(n.Members)))
	}
	return strings.Join(parts, ",")
}

// TestFitPreemptVerdicts: when preempting cannot or may not help, the gang
// does not fit, with the scheduler's words; an elastic gang's extra goes
// before anything whole; --no-preemption asks only "fits now".
func TestFitPreemptVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name, class string
		args        []string
		verdict     string
		preemption  string
		victims     string
	}{
		{name: "equal priority", class: "low", verdict: "does not fit",
			preemption: "gang team-a/urgent: preemption would not help: no running pod has a lower priority"},
		{name: "preemptionPolicy Never", class: "polite", verdict: "does not fit",
			preemption: "gang team-a/urgent: not preempting: preemptionPolicy is Never"},
		{name: "unknown class", class: "missing", verdict: "does not fit",
			preemption: `not evaluated: member leader-0: priorityClassName "missing": no PriorityClass with that name (the API server would refuse the pod)`},
		{name: "no preemption asked", class: "high", args: []string{"--no-preemption"}, verdict: "does not fit"},
		{name: "mid takes low only", class: "mid", verdict: "fits after preempting", victims: "pod team-c/solo, gang team-b/low-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, fullCluster(t), "", append([]string{"fit", "-f", urgentFile(t, tc.class), "-o", "json"}, tc.args...)...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			r := decodeFit(t, res.stdout)
			g := r.Clusters[0].Workloads[0].Gangs[0]
			var victims []string
			for _, v := range g.Victims {
				victims = append(victims, v.Kind+" "+v.Namespace+"/"+v.Name)
			}
			if g.Verdict != tc.verdict || r.Clusters[0].Verdict != tc.verdict || g.Preemption != tc.preemption || strings.Join(victims, ", ") != tc.victims {
				t.Errorf("verdict %q (cluster %q), preemption %q, victims %q; want %q, %q, %q", g.Verdict, r.Clusters[0].Verdict, g.Preemption, victims, tc.verdict, tc.preemption, tc.victims)
			}
			if len(tc.args) > 0 && (r.Preemption != "not evaluated" || g.Priority != nil) {
				t.Errorf("--no-preemption: report preemption %q, gang priority %v; want not evaluated and none", r.Preemption, g.Priority)
			}
			if tc.victims == "" && r.Clusters[0].GPUsFreeAfter != r.Clusters[0].GPUsFree {
				t.Errorf("a gang that does not fit changed the free GPUs: %d → %d", r.Clusters[0].GPUsFree, r.Clusters[0].GPUsFreeAfter)
			}
		})
	}

	// A gang of one 2-GPU member: the elastic gang's extra (its youngest
	// member) is the cheapest unit, and the gang keeps its quorum.
	small := strings.Replace(readFile(t, fitTestdata("urgent.yaml")), "replicas: 2", "replicas: 0", 1)
	small = strings.ReplaceAll(small, `nvidia.com/gpu: "4"`, `nvidia.com/gpu: "2"`)
	path := filepath.Join(t.TempDir(), "small.yaml")
	if err := os.WriteFile(path, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, fullCluster(t), "", "fit", "-f", path, "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	g := decodeFit(t, res.stdout).Clusters[0].Workloads[0].Gangs[0]
	if len(g.Victims) != 1 || g.Victims[0].Kind != "extra" || g.Victims[0].Name != "low-a-0" || g.Victims[0].Gang != "low-a" || g.Victims[0].Unit != "extra team-b/low-a-0 of gang team-b/low-a" {
		t.Errorf("victims %+v; want the extra low-a-0 of gang low-a (the youngest member above its quorum of 3)", g.Victims)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestFitRanksPreemption: fits now, then fits after preempting with fewer
// pods evicted, then more, then does not fit.
func TestFitRanksPreemption(t *testing.T) {
	// fewer: f4's lone pod holds 4 GPUs, so only it and one 2-pod gang go
	// (or less); more: every GPU is held by 1-GPU lone pods.
	var lone []runtime.Object
	for n := range 2 {
		for i := range 8 {
			lone = append(lone, runningPod("team-c", fmt.Sprintf("p%d-%d", n, i), fmt.Sprintf("m%d", n+1), "", 1, "low", 10, time.Hour))
		}
	}
	more := fitCluster(t, []fitNode{{name: "m1", zone: "zone-a", gpus: 8}, {name: "m2", zone: "zone-a", gpus: 8}}, nil,
		append(lone, priorityClass("low", 10, false, false), priorityClass("high", 1000, false, false))...)
	withFitClusters(t, map[string]*Cluster{"full": fullCluster(t), "lone": more, "empty": clusterB(t), "small": clusterC(t)})
	res := run(t, nil, "", "fit", "-f", fitTestdata("urgent.yaml"), "--context", "small", "--context", "lone", "--context", "full", "--context", "empty", "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var order []string
	for _, c := range decodeFit(t, res.stdout).Clusters {
		order = append(order, fmt.Sprintf("%s:%s:%d", c.Context, c.Verdict, c.VictimPods))
	}
	want := "empty:fits now:0 full:fits after preempting:3 lone:fits after preempting:12 small:does not fit:0"
	if strings.Join(order, " ") != want {
		t.Errorf("ranking %v; want %s", order, want)
	}
	res = run(t, nil, "", "fit", "-f", fitTestdata("urgent.yaml"), "--context", "small", "--context", "lone", "--context", "full", "--context", "empty", "--color", "never")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "fit/rank-preempt.txt", res.stdout)
}

// BenchmarkFitPreempt1000Nodes is fit on 1000 nodes × 8 GPUs every one of
// which a gang of 8 × 1 GPU at priority 10 fills (8000 bound pods): a Job
// of 16 × 1 GPU at 1000 fits after preempting two whole gangs (the
// fewest pods that make room), found by the plugin's victim search.
func BenchmarkFitPreempt1000Nodes(b *testing.B) {
	objs := []runtime.Object{priorityClass("low", 10, false, false), priorityClass("high", 1000, false, false)}
	for i := range 1000 {
		name := fmt.Sprintf("n%04d", i)
		alloc := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("1Ti"),
			corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8"),
		}
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}})
		for j := range 8 {
			objs = append(objs, runningPod("team-b", fmt.Sprintf("g%04d-%d", i, j), name, fmt.Sprintf("g%04d", i), 1, "low", 10, time.Duration(i)*time.Second))
		}
	}
	c := &Cluster{Mapper: meta.NewDefaultRESTMapper(nil), Kube: kubefake.NewClientset(objs...), Namespace: "default"}
	job := `{"apiVersion": "batch/v1", "kind": "Job",
	 "metadata": {"name": "urgent", "namespace": "team-a", "annotations": {"muster.io/min-member": "16"}},
	 "spec": {"parallelism": 16, "completions": 16, "template": {"spec": {"priorityClassName": "high",
	   "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}`
	b.ReportAllocs()
	for b.Loop() {
		res := run(b, c, job, "fit", "-f", "-", "-o", "json")
		if res.code != 0 {
			b.Fatalf("exit %d: %s", res.code, res.stderr)
		}
		var r FitReport
		if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
			b.Fatal(err)
		}
		if c := r.Clusters[0]; !c.FitsAfterPreempting || c.BoundPods != 8000 || c.VictimUnits != 2 || c.VictimPods != 16 {
			b.Fatalf("cluster %s, %d bound pods, victims %d units %d pods; want fits after preempting, 8000, 2 gangs of 16 pods", c.Verdict, c.BoundPods, c.VictimUnits, c.VictimPods)
		}
	}
}

// TestFitLivePreempts: the submitted JobSet's leader is bound on b2, its
// two workers pending; zone-b (required) is full but for 4 GPUs, held with
// a gang team-b/low-x at priority 10 (one member on b2, one on b5). fit
// evicts low-x and places both workers in zone-b. The gang's priority is
// the one the pod-grouper recorded on its PodGroup, or its pending pods'
// spec.priority; in the second case its bound leader has priority 0, and
// it is the gang's own, never a victim (though the cheapest unit).
func TestFitLivePreempts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recorded map[string]any
		class    string
	}{
		{name: "recorded on the PodGroup", recorded: map[string]any{api.AnnotationPriority: "1000", api.AnnotationPriorityClass: "high"}, class: "high"},
		{name: "spec.priority of the pending members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := liveJobSetOn(t, true, tc.recorded, []fitNode{
				{name: "a1", zone: "zone-a", gpus: 8},
				{name: "b2", zone: "zone-b", gpus: 8},
				{name: "b5", zone: "zone-b", gpus: 8},
			}, runningPod("team-b", "low-x-0", "b5", "low-x", 4, "low", 10, time.Hour), runningPod("team-b", "low-x-1", "b2", "low-x", 4, "low", 10, time.Hour),
				priorityClass("low", 10, false, false), priorityClass("high", 1000, false, false))
			if tc.recorded == nil {
				for _, name := range []string{"train-workers-0-0-fghij", "train-workers-1-0-klmno"} {
					p, err := c.Kube.CoreV1().Pods("team-a").Get(context.Background(), name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					p.Spec.Priority = ptrTo[int32](1000)
					if _, err := c.Kube.CoreV1().Pods("team-a").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			res := run(t, c, "", "fit", "jobset/train", "-n", "team-a", "-o", "json")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			g := decodeFit(t, res.stdout).Clusters[0].Workloads[0].Gangs[0]
			if g.Verdict != "fits after preempting" || g.Priority == nil || *g.Priority != 1000 || g.PriorityClass != tc.class || g.Bound != 1 {
				t.Fatalf("gang %+v; want fits after preempting at priority 1000 (class %q), 1 bound", g, tc.class)
			}
			if units := strings.Join(fitUnits(g), ", "); units != "gang team-b/low-x" {
				t.Errorf("victims %s; want gang team-b/low-x (never the gang's own bound leader)", units)
			}
			if got := fitNodeCounts(g); got != "b2=1,b5=1" {
				t.Errorf("members per node %s; want b2=1,b5=1 (zone-b, where low-x was)", got)
			}
		})
	}
}

func fitUnits(g GangFit) []string {
	var out []string
	for _, v := range g.Victims {
		out = append(out, v.Unit)
	}
	return out
}
