package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
