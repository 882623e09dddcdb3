package gang

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/muster-io/muster/api"
)

// gpuTally keeps muster_gang_gpus_allocatable and muster_gang_gpus_allocated
// from the scheduler's node and pod informers: the figures a dashboard
// graphs next to the gang metrics, counted where the objects already are
// rather than by another watcher. Each object's last contribution is kept,
// so that an update or delete takes back exactly what it added. A pod
// counts only while its node exists: pods left bound to a deleted node
// (until the pod garbage collector removes them) hold no allocatable GPU,
// and allocated never exceeds allocatable for them.
type gpuTally struct {
	mu       sync.Mutex
	names    []v1.ResourceName
	nodes    map[string]int64
	pods     map[types.UID]podGPUs
	onNode   map[string]*[2]int64 // node → GPUs its pods hold, known node or not
	capacity int64
	held     [2]int64 // on known nodes; index 1: gang members
}

type podGPUs struct {
	node   string
	gpus   int64
	inGang bool
}

func newGPUTally(names []v1.ResourceName) *gpuTally {
	return &gpuTally{names: names, nodes: map[string]int64{}, pods: map[types.UID]podGPUs{}, onNode: map[string]*[2]int64{}}
}

// handlers registers the tally on the two informers.
func (t *gpuTally) handlers(pods, nodes cache.SharedIndexInformer) error {
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.pod,
		UpdateFunc: func(_, obj any) { t.pod(obj) },
		DeleteFunc: t.podGone,
	}); err != nil {
		return err
	}
	_, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.node,
		UpdateFunc: func(_, obj any) { t.node(obj) },
		DeleteFunc: t.nodeGone,
	})
	return err
}

func (t *gpuTally) gpus(rl v1.ResourceList) int64 {
	var n int64
	for _, name := range t.names {
		if q, ok := rl[name]; ok {
			n += q.Value()
		}
	}
	return n
}

// pod counts a pod bound to a node and not finished, as the scheduler's
// cache does; any other pod counts nothing.
func (t *gpuTally) pod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	var now podGPUs
	if pod.Spec.NodeName != "" && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
		now = podGPUs{node: pod.Spec.NodeName, gpus: t.gpus(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})), inGang: isGangMember(pod)}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unholdLocked(pod.UID)
	if now.gpus > 0 {
		t.pods[pod.UID] = now
		t.addLocked(now, 1)
	}
	t.publishLocked()
}

func (t *gpuTally) podGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unholdLocked(pod.UID)
	t.publishLocked()
}

func (t *gpuTally) unholdLocked(uid types.UID) {
	if was, ok := t.pods[uid]; ok {
		t.addLocked(was, -1)
		delete(t.pods, uid)
	}
}

// addLocked adds (sign 1) or takes back (-1) what p holds on its node.
func (t *gpuTally) addLocked(p podGPUs, sign int64) {
	on := t.onNode[p.node]
	if on == nil {
		on = &[2]int64{}
		t.onNode[p.node] = on
	}
	on[b2i(p.inGang)] += sign * p.gpus
	if _, known := t.nodes[p.node]; known {
		t.held[b2i(p.inGang)] += sign * p.gpus
	}
	if *on == [2]int64{} {
		delete(t.onNode, p.node)
	}
}

func (t *gpuTally) node(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	was, known := t.nodes[node.Name]
	n := t.gpus(node.Status.Allocatable)
	t.nodes[node.Name] = n
	t.capacity += n - was
	if on := t.onNode[node.Name]; on != nil && !known {
		t.held[0] += on[0]
		t.held[1] += on[1]
	}
	t.publishLocked()
}

func (t *gpuTally) nodeGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.nodes[node.Name]; !known {
		return
	}
	t.capacity -= t.nodes[node.Name]
	delete(t.nodes, node.Name)
	if on := t.onNode[node.Name]; on != nil {
		t.held[0] -= on[0]
		t.held[1] -= on[1]
	}
	t.publishLocked()
}

func (t *gpuTally) publishLocked() {
	gpusAllocatable.Set(float64(t.capacity))
	gpusAllocated.WithLabelValues("false").Set(float64(t.held[0]))
	gpusAllocated.WithLabelValues("true").Set(float64(t.held[1]))
}

// totals returns allocatable, and allocated outside and inside gangs.
func (t *gpuTally) totals() (capacity, outside, inGang int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.capacity, t.held[0], t.held[1]
}

// isGangMember: the pod-grouper's label names the pod's PodGroup (native
// gangs included: muster_gang_gpus_allocated counts every scheduler's pods).
func isGangMember(pod *v1.Pod) bool {
	return pod.Labels[api.LabelPodGroup] != "" || pod.Spec.SchedulingGroup != nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
