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
