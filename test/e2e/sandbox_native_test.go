package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/api"
	sandboxapp "github.com/muster-io/muster/cmd/muster-sandbox/app"
)

// TestSandboxNative: `muster-sandbox --native` runs the examples on native
// gangs: the pod-grouper writes scheduling.k8s.io/v1beta1 PodGroups with
// the definitions' sizes, its webhook joins every member at creation, the
// default kube-scheduler binds each gang whole, and the gang too big binds
// nothing while `muster describe` gives the scheduler's reason.
func TestSandboxNative(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 4, GPUsPerNode: 8, Zones: 2, Native: true})
	ns := sandboxapp.ExampleNamespace
	ctx := context.Background()
	out, progress := sb.stdout.String(), sb.progress.String()
	t.Logf("progress:\n%s", progress)

	nsObj, err := sb.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels[api.LabelNativeGangs] != api.NativeGangsEnabled {
		t.Errorf("namespace %s labels %v: not opted in", ns, nsObj.Labels)
	}
	pgs, err := sb.kube.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byWorkload := map[string][]int32{}
	names := map[string]bool{}
	for _, pg := range pgs.Items {
		if pg.Labels[api.LabelWorkloadUID] == "" || pg.Spec.SchedulingPolicy.Gang == nil {
			t.Errorf("native PodGroup %s: labels %v, policy %+v; want muster's gang", pg.Name, pg.Labels, pg.Spec.SchedulingPolicy)
			continue
		}
		w := pg.Labels[api.LabelWorkloadKind] + "/" + pg.Labels[api.LabelWorkloadName]
		byWorkload[w] = append(byWorkload[w], pg.Spec.SchedulingPolicy.Gang.MinCount)
		names[pg.Name] = true
	}
	for w, want := range map[string][]int32{"JobSet/train": {3}, "LeaderWorkerSet/serve": {2, 2}, "JobSet/pretrain": {5}} {
		if got := byWorkload[w]; len(got) != len(want) || !equalCounts(got, want) {
			t.Errorf("%s: native PodGroups with minCount %v, want %v", w, got, want)
		}
	}
	if len(byWorkload["Deployment/embeddings"]) != 0 {
		t.Errorf("the gang-free Deployment got native PodGroups %v", byWorkload["Deployment/embeddings"])
	}
	if n, err := sb.dyn.Resource(podGroupsGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil || len(n.Items) != 0 {
		t.Errorf("scheduler-plugins PodGroups in native mode: %d (%v), want none", len(n.Items), err)
	}

	for _, sel := range []string{"jobset.sigs.k8s.io/jobset-name=train", "leaderworkerset.sigs.k8s.io/name=serve"} {
		pods := sb.pods(t, ns, sel)
		if len(pods) == 0 {
			t.Errorf("%s: no pods", sel)
		}
		for _, p := range pods {
			g := p.Spec.SchedulingGroup
			if g == nil || g.PodGroupName == nil || !names[*g.PodGroupName] || p.Spec.NodeName == "" {
				t.Errorf("pod %s: schedulingGroup %+v, node %q; want joined to a native PodGroup and bound", p.Name, g, p.Spec.NodeName)
			}
		}
	}
	for _, p := range sb.pods(t, ns, "jobset.sigs.k8s.io/jobset-name=pretrain") {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of the gang that cannot fit is bound to %s", p.Name, p.Spec.NodeName)
		}
		if p.Spec.SchedulingGroup == nil {
			t.Errorf("pod %s of the gang that cannot fit is not joined", p.Name)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\$ muster describe jobset/pretrain -n examples$`),
		regexp.MustCompile(`(?i)minCount \(5\) cannot be satisfied`),
	} {
		if !want.MatchString(out) {
			t.Errorf("stdout lacks %s:\n%s", want, out)
		}
	}
	for _, step := range []string{"native gangs: pod-grouper in native mode", "default-scheduler with the GenericWorkload gate", "example 01-jobset-train.yaml scheduled"} {
		if !strings.Contains(progress, step) {
			t.Errorf("progress lacks %q", step)
		}
	}
	if strings.Contains(progress, "muster-scheduler running") {
		t.Errorf("muster-scheduler ran in native mode:\n%s", progress)
	}
	if err := sb.stop(); err != nil {
		t.Fatalf("sandbox: %v", err)
	}
}

// equalCounts compares two lists of counts as multisets.
func equalCounts(a, b []int32) bool {
	seen := map[int32]int{}
	for _, v := range a {
		seen[v]++
	}
	for _, v := range b {
		seen[v]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}
