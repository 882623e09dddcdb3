package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/muster-io/muster/api"
)

// nativeFitCluster is train.yaml submitted in native mode: a native
// PodGroup train-js-uid of minCount (unless 0: none), the leader bound to
// b2 and the two workers pending, every pod naming it, on nodes.
func nativeFitCluster(t *testing.T, minCount int32, served bool, nodes []fitNode) *Cluster {
	t.Helper()
	root := readObjects(t, fitTestdata("train.yaml"))[0]
	root.SetUID("js-uid")
	var typed []runtime.Object
	if minCount > 0 {
		typed = append(typed, &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "train-js-uid", Namespace: "team-a",
				Labels: map[string]string{api.LabelDefinition: "jobset", api.LabelWorkloadUID: "js-uid"},
				// Not the in-tree plugin's: fit must not apply it.
				Annotations: map[string]string{api.AnnotationTopologyRequired: "topology.kubernetes.io/zone"}},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
		})
	}
	typed = append(typed, trainPods(func(p *corev1.Pod) {
		p.Spec.SchedulerName = "default-scheduler"
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptrString("train-js-uid")}
	})...)
	c := fitCluster(t, nodes, []*unstructured.Unstructured{root}, typed...)
	if served {
		c.Mapper.(*meta.DefaultRESTMapper).Add(nativePodGroupGVK, meta.RESTScopeNamespace)
	}
	return c
}

// TestFitNative: fit answers for a submitted native gang: its size is the
// native PodGroup's minCount, its members the pods naming it, the bound
// one stays; the verdicts and reasons as the scheduler would give them.
func TestFitNative(t *testing.T) {
	roomy := []fitNode{{name: "a1", zone: "zone-a", gpus: 8}, {name: "b2", zone: "zone-b", gpus: 8}, {name: "b5", zone: "zone-b", gpus: 8, used: 4}}
	full := []fitNode{{name: "a1", zone: "zone-a", gpus: 8, used: 8}, {name: "b2", zone: "zone-b", gpus: 8, used: 4}, {name: "b5", zone: "zone-b", gpus: 8, used: 8}}
	for _, tc := range []struct {
		name     string
		minCount int32
		served   bool
		nodes    []fitNode
		// want
		verdict, reason, source string
		native                  bool
		minMember               int
	}{
		{name: "fits: the two pending workers, beside the bound leader, in any zone", minCount: 3, served: true, nodes: roomy,
			verdict: verdictFits, source: "live", native: true, minMember: 3},
		{name: "does not fit", minCount: 3, served: true, nodes: full,
			verdict: verdictNoFit, reason: "gang team-a/train-js-uid", source: "live", native: true, minMember: 3},
		{name: "minCount above the pods: the scheduler holds them", minCount: 4, served: true, nodes: roomy,
			verdict: verdictUnknown, reason: "native PodGroup team-a/train-js-uid: waiting for minCount pods from a gang to appear in scheduling queue: 3 of 4 (minCount) exist", source: "live", native: true, minMember: 4},
		{name: "PodGroup missing", served: true, nodes: roomy,
			verdict: verdictNoFit, reason: "native PodGroup team-a/train-js-uid not found: the scheduler holds its members until it exists", source: "live", native: true, minMember: 1},
		// The spec's three members, with its required zone, beside the
		// leader that is bound: 2 fit in either zone.
		{name: "API not served: the spec, as without native gangs", minCount: 3, nodes: roomy,
			verdict: verdictNoFit, reason: "best placement fits 2 of 3 members", source: "spec", minMember: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, nativeFitCluster(t, tc.minCount, tc.served, tc.nodes), "", "fit", "jobset/train", "-n", "team-a", "-o", "json")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			w := decodeFit(t, res.stdout).Clusters[0].Workloads[0]
			if w.Source != tc.source || len(w.Gangs) != 1 {
				t.Fatalf("source %s, gangs %+v; want %s and one gang", w.Source, w.Gangs, tc.source)
			}
			g := w.Gangs[0]
			if g.Verdict != tc.verdict || g.Native != tc.native || g.MinMember != tc.minMember || !strings.Contains(g.Reason, tc.reason) {
				t.Errorf("gang %+v; want verdict %q, native %v, minMember %d, reason with %q", g, tc.verdict, tc.native, tc.minMember, tc.reason)
			}
			if tc.native && (g.PodGroup != "train-js-uid" || g.Members != 3 || g.Bound != 1 || g.Topology != nil) {
				t.Errorf("gang %+v; want PodGroup train-js-uid, 3 members, 1 bound, no topology (muster's annotation is not the in-tree plugin's)", g)
			}
			if tc.verdict == verdictFits && len(g.Assignments) != 2 {
				t.Errorf("assignments %+v; want the two pending workers", g.Assignments)
			}
		})
	}

	res := run(t, nativeFitCluster(t, 3, true, roomy), "", "fit", "jobset/train", "-n", "team-a", "--color", "never")
	if res.code != 0 || !strings.Contains(res.stdout, "Gang train-js-uid (native PodGroup): fits now; minCount 3, 3 members (1 bound)") {
		t.Errorf("table (exit %d) does not name the native gang:\n%s%s", res.code, res.stdout, res.stderr)
	}
}
