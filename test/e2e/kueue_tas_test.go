package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// kueueTopologyGate is the scheduling gate Kueue's topology-aware
// scheduling puts on the pods of an admitted workload until its ungater
// gives each pod the node selector of its assigned domain.
const kueueTopologyGate = "kueue.x-k8s.io/topology"

// gateWatch records, from a watch of pods, which pods were seen with
// Kueue's topology gate and any pod seen bound while still gated.
type gateWatch struct {
	mu         sync.Mutex
	gated      map[string]bool
	boundGated []string
}

func watchGates(t *testing.T, ns, selector string) *gateWatch {
	t.Helper()
	w := &gateWatch{gated: map[string]bool{}}
	lw := cache.NewFilteredListWatchFromClient(controlPlane.Client.CoreV1().RESTClient(), "pods", ns, func(o *metav1.ListOptions) { o.LabelSelector = selector })
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	record := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range p.Spec.SchedulingGates {
			if g.Name == kueueTopologyGate {
				w.gated[p.Name] = true
				if p.Spec.NodeName != "" {
					w.boundGated = append(w.boundGated, p.Name+" on "+p.Spec.NodeName)
				}
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the pod watch did not sync")
	}
	return w
}

func (w *gateWatch) result() (gated int, boundGated []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.gated), append([]string(nil), w.boundGated...)
}

// TestKueueTopologyAware: Kueue's topology-aware scheduling in front of
// muster. A JobSet of 2 pods × 8 GPUs asks Kueue for one rack
// (kueue.x-k8s.io/podset-required-topology) on a flavor whose Topology is
// the rack label; the pool has a rack of 2 nodes and one of 3. Kueue admits
// it to a rack and creates the pods behind its topology gate; muster binds
// none of them while they are gated, and once Kueue's ungater has given
// them the rack's node selector, muster binds the gang whole inside that
// rack.
func TestKueueTopologyAware(t *testing.T) {
	startKueue(t, "", "jobset")
	ns := testNamespace(t, "kueue-tas-")
	sched := "muster-" + ns
	startGangScheduler(t, sched, nil)
	racks := []string{"r-small", "r-small", "r-big", "r-big", "r-big"}
	testPool(t, ns, len(racks), func(i int) localcluster.NodeSpec {
		return localcluster.NodeSpec{GPUs: 8, Labels: map[string]string{localcluster.RackLabel: racks[i]}}
	})
	startPodGrouper(t, sched)
	sel, tol := localcluster.PoolPlacement(ns)
	applyKueueQueues(t, localcluster.KueueQueues{
		ClusterQueue: ns, Namespace: ns, LocalQueue: "default", GPUs: 8 * len(racks),
		TopologyLevels: []string{localcluster.RackLabel}, FlavorNodeLabels: sel, FlavorTolerations: []corev1.Toleration{tol},
	})

	const selector = "jobset.sigs.k8s.io/jobset-name=tas"
	gates := watchGates(t, ns, selector)
	doc := kueueJobSetYAML("tas", ns, sched, 2, 8, "")
	withTopology := strings.Replace(doc, "        template:\n          spec:\n",
		"        template:\n          metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: "+localcluster.RackLabel+"}}\n          spec:\n", 1)
	if withTopology == doc {
		t.Fatal("the JobSet's pod template was not found to annotate")
	}
	applyYAML(t, ns, withTopology)
	waitWorkloadCondition(t, ns, "JobSet", "tas", "Admitted", "True")
	pods := waitRunning(t, ns, selector, 2)

	nodes, err := controlPlane.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: localcluster.PoolLabel + "=" + ns})
	if err != nil {
		t.Fatal(err)
	}
	rackOf := map[string]string{}
	for _, n := range nodes.Items {
		rackOf[n.Name] = n.Labels[localcluster.RackLabel]
	}
	assigned := map[string]bool{}
	for _, p := range pods {
		r := p.Spec.NodeSelector[localcluster.RackLabel]
		if r == "" {
			t.Errorf("pod %s has no %s node selector from Kueue: %v", p.Name, localcluster.RackLabel, p.Spec.NodeSelector)
		}
		assigned[r] = true
		if rackOf[p.Spec.NodeName] != r {
			t.Errorf("pod %s bound to %s in rack %q, outside the rack %q Kueue assigned", p.Name, p.Spec.NodeName, rackOf[p.Spec.NodeName], r)
		}
		if p.Labels[api.LabelPodGroup] == "" {
			t.Errorf("pod %s is in no muster gang", p.Name)
		}
		for _, g := range p.Spec.SchedulingGates {
			t.Errorf("pod %s bound with the gate %s", p.Name, g.Name)
		}
	}
	if len(assigned) != 1 {
		t.Errorf("the pods were assigned racks %v, want one (a required topology)", assigned)
	}
	gated, boundGated := gates.result()
	if gated != 2 {
		t.Errorf("%d pods were seen behind Kueue's topology gate, want both", gated)
	}
	if len(boundGated) > 0 {
		t.Errorf("pods bound while gated: %v", boundGated)
	}
	t.Logf("Kueue assigned rack %v; the gang bound there: %s, %s", assigned, pods[0].Spec.NodeName, pods[1].Spec.NodeName)
}
