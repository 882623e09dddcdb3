package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

var rayClustersGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}

// TestOperatorKubeRayPodGroup runs the real KubeRay operator (a child
// process built from localcluster/operators/kuberay, CRDs from the same module): it
// creates the head pod and the worker pods itself, with no ReplicaSet or
// StatefulSet between. The pod-grouper (in-process, catalog definition
// raycluster) puts the whole cluster, head included, into one PodGroup; the
// shipped muster-scheduler profile then binds the gang; deleting the
// RayCluster collects pods and PodGroup.
func TestOperatorKubeRayPodGroup(t *testing.T) {
	startOperator(t, "kuberay")
	ctx := t.Context()
	ns := testNamespace(t, "kuberay-")
	const sched = "muster-scheduler"
	gpuPool(t, ns, 2, 2)
	startPodGrouper(t, sched)

	// No autoscaler: the catalog counts the desired replicas, 1 head + 2
	// workers of 2 GPUs each.
	applyYAML(t, ns, rayClusterYAML("llm", ns, sched, 2, 2))
	rc, err := controlPlane.Dynamic.Resource(rayClustersGVR).Namespace(ns).Get(ctx, "llm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// What the operator made: the pods themselves, owned by the RayCluster,
	// with KubeRay's labels (only the real operator sets these).
	sel := "ray.io/cluster=llm"
	pods := pgrWaitPods(t, ns, sel, 3, "created by KubeRay", func(*corev1.Pod) bool { return true })
	var kinds []string
	for _, p := range pods {
		kinds = append(kinds, p.Labels["ray.io/node-type"]+"/"+p.Labels["ray.io/group"])
		if p.Labels["ray.io/is-ray-node"] != "yes" {
			t.Errorf("pod %s: ray.io/is-ray-node = %q, want yes", p.Name, p.Labels["ray.io/is-ray-node"])
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "RayCluster" || ref.UID != rc.GetUID() {
			t.Errorf("pod %s: controller %v, want RayCluster llm (%s)", p.Name, ref, rc.GetUID())
		}
	}
	sort.Strings(kinds)
	if got, want := strings.Join(kinds, ","), "head/headgroup,worker/gpu,worker/gpu"; got != want {
		t.Errorf("pods (node-type/group) = %s, want %s", got, want)
	}

	// One PodGroup for the whole cluster.
	var pg *schedv1alpha1.PodGroup
	waitFor(t, localcluster.ShortTimeout, "one PodGroup in "+ns+" with minMember 3 and 4 GPUs", func(ctx context.Context) (bool, string, error) {
		l, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for i := range l.Items {
			g := &l.Items[i]
			gpus := g.Spec.MinResources["nvidia.com/gpu"]
			seen = append(seen, fmt.Sprintf("%s minMember=%d gpus=%s", g.Name, g.Spec.MinMember, gpus.String()))
			pg = g
		}
		if len(l.Items) != 1 {
			return false, fmt.Sprintf("%d PodGroups: %v", len(l.Items), seen), nil
		}
		gpus := pg.Spec.MinResources["nvidia.com/gpu"]
		return pg.Spec.MinMember == 3 && gpus.Value() == 4, strings.Join(seen, "; "), nil
	})
	wantLabels := map[string]string{api.LabelWorkloadKind: "RayCluster", api.LabelWorkloadName: "llm", api.LabelDefinition: "raycluster"}
	for k, v := range wantLabels {
		if pg.Labels[k] != v {
			t.Errorf("PodGroup %s label %s = %q, want %q", pg.Name, k, pg.Labels[k], v)
		}
	}
	if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].UID != rc.GetUID() || !ptr.Deref(pg.OwnerReferences[0].Controller, false) {
		t.Errorf("PodGroup %s owners = %+v, want the RayCluster %s as controller", pg.Name, pg.OwnerReferences, rc.GetUID())
	}
	pgrWaitPods(t, ns, sel, 3, "in PodGroup "+pg.Name, pgrInGroup(pg.Name))

	// The gang fits the pool (head and one worker on one node, the other
	// worker on the second) and is bound whole.
	startGangScheduler(t, sched, nil)
	waitRunning(t, ns, sel, 3)

	// Delete the RayCluster: the garbage collector takes pods and PodGroup.
	if err := controlPlane.Dynamic.Resource(rayClustersGVR).Namespace(ns).Delete(ctx, "llm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, sel)
	waitFor(t, localcluster.ShortTimeout, "PodGroup "+pg.Name+" collected with its RayCluster", objectGone(podGroups(t).SchedulingV1alpha1().PodGroups(ns), pg.Name))
}

// rayClusterYAML is a RayCluster of a head (1 CPU) and a worker group of
// workers pods of gpus GPUs each, placed on the pool, for sched.
func rayClusterYAML(name, pool, sched string, workers, gpus int) string {
	// group is the part a head and a worker group share: one container,
	// placed on the pool, for sched.
	group := func(container, image, resources string) string {
		return `
    rayStartParams: {}
    template:
      spec:
        ` + podPlacement(pool, sched, "        ") + `
        containers:
        - name: ` + container + `
          image: ` + image + `
          resources: ` + resources
	}
	return `
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: ` + name + `}
spec:
  rayVersion: "2.52.0"
  headGroupSpec:` + group("ray-head", "rayproject/ray:2.52.0", `{requests: {cpu: "1"}}`) + `
  workerGroupSpecs:
  - groupName: gpu
    replicas: ` + fmt.Sprint(workers) + `
    numOfHosts: 1` + group("ray-worker", "rayproject/ray:2.52.0-gpu", fmt.Sprintf(`{requests: {cpu: "1", nvidia.com/gpu: %d}, limits: {nvidia.com/gpu: %d}}`, gpus, gpus)) + `
`
}

// TestNativeKubeRay: in native mode, the real KubeRay operator's pods (it
// creates them itself, head and workers) are joined at creation to one
// native PodGroup per RayCluster, head included, of the catalog's size;
// the default scheduler binds the cluster whole, and a second cluster too
// big for what is left binds none of its pods, head included.
func TestNativeKubeRay(t *testing.T) {
	startOperator(t, "kuberay")
	ctx := t.Context()
	ns, sched, rig := defaultSchedulerRig(t, "native-ray-", 2)
	rig.start(t, true)

	applyYAML(t, ns, rayClusterYAML("llm", ns, sched, 2, 2))
	rc, err := controlPlane.Dynamic.Resource(rayClustersGVR).Namespace(ns).Get(ctx, "llm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := nativeGroupName(t, ns, rc.GetUID())
	pg, err := controlPlane.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 3 || pg.Labels[api.LabelDefinition] != "raycluster" {
		t.Errorf("native PodGroup %s: policy %+v, labels %v; want a gang of 3 of definition raycluster", name, pg.Spec.SchedulingPolicy, pg.Labels)
	}
	pods, err := controlPlane.WaitPodsBound(ctx, ns, "ray.io/cluster=llm", 3, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if g := p.Spec.SchedulingGroup; g == nil || ptr.Deref(g.PodGroupName, "") != name {
			t.Errorf("pod %s: schedulingGroup %+v, want %s", p.Name, g, name)
		}
	}

	// Every GPU of the pool is taken: a cluster of 1 head and 1 worker of
	// 2 GPUs cannot start, and its head, which would fit, is not bound.
	applyYAML(t, ns, rayClusterYAML("big", ns, sched, 1, 2))
	big, err := controlPlane.Dynamic.Resource(rayClustersGVR).Namespace(ns).Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bigGroup := nativeGroupName(t, ns, big.GetUID())
	pgrWaitPods(t, ns, "ray.io/cluster=big", 2, "joined to "+bigGroup, func(p *corev1.Pod) bool {
		return p.Spec.SchedulingGroup != nil && ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, "") == bigGroup
	})
	holdsFor(t, 5*time.Second, "no pod of RayCluster big bound", func(ctx context.Context) (bool, string, error) {
		list, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=big"})
		if err != nil {
			return false, "", err
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				return false, "pod " + p.Name + " bound to " + p.Spec.NodeName, nil
			}
		}
		return true, "", nil
	})
}
