package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/muster-io/muster/localcluster"
)

// TestCatalogRayJobClusterSelector replays a RayJob that runs on an
// existing RayCluster (spec.clusterSelector) next to that cluster, in one
// namespace: the cluster's pods form the RayCluster's gang, the submitter
// is scheduled alone, and the RayJob adds no PodGroup of its own, now or
// for a while after.
func TestCatalogRayJobClusterSelector(t *testing.T) {
	sched := "cat-rayjob-selector"
	startPodGrouper(t, sched)
	ns := testNamespace(t, "cat-rj-sel-")
	cluster := catLoadFixture(t, "raycluster")
	job := catLoadFixture(t, filepath.Join("rayjob", "clusterselector"))
	// The RayJob selects the cluster the raycluster fixture replays.
	if err := unstructured.SetNestedStringMap(job.root.Object, map[string]string{"ray.io/cluster": cluster.root.GetName()}, "spec", "clusterSelector"); err != nil {
		t.Fatal(err)
	}
	if len(job.want.Gangs) != 0 {
		t.Fatalf("rayjob/clusterselector/expected.yaml lists gangs %v; the RayJob should add none", job.want.Gangs)
	}
	pgrReplayFixture(t, ns, sched, job.root, job.children, job.pods)
	pgrReplayFixture(t, ns, sched, cluster.root, cluster.children, cluster.pods)

	// Every pod as its expected.yaml says; the PodGroups of the namespace
	// are exactly the cluster's gangs (pgrCheckFixture counts them).
	want := cluster.want
	for name, p := range job.want.Pods {
		if _, dup := want.Pods[name]; dup {
			t.Fatalf("pod %s is in both fixtures", name)
		}
		want.Pods[name] = p
	}
	pgrCheckFixture(t, ns, "raycluster", cluster.root.GetName(), want)

	gangs := map[string]bool{}
	for _, p := range cluster.want.Pods {
		if p.Gang != "" {
			gangs[p.Gang] = true
		}
	}
	settled := podGroupNames(t, ns)
	err := localcluster.Consistently(context.Background(), 3*time.Second, "no PodGroup for the RayJob", func(ctx context.Context) (bool, string, error) {
		names := podGroupNames(t, ns)
		return len(names) == len(gangs) && fmt.Sprint(names) == fmt.Sprint(settled), fmt.Sprint(names), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
