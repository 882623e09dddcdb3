package cli

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/api"
)

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
	pods := trainPods(func(p *corev1.Pod) { p.Labels = map[string]string{api.LabelPodGroup: "train"} })
	return fitCluster(t, nodes, dyn, append(pods, extra...)...)
}

// trainPods are the pods of train.yaml submitted, each changed by mutate:
// the leader bound to b2, the two workers pending.
func trainPods(mutate func(*corev1.Pod)) []runtime.Object {
	var pods []runtime.Object
	for i, name := range []string{"train-leader-0-0-abcde", "train-workers-0-0-fghij", "train-workers-1-0-klmno"} {
		q := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-" + name),
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
		mutate(p)
		pods = append(pods, p)
	}
	return pods
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
