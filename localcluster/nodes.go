package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Topology label keys set by Topology. The zone key is the well-known
// Kubernetes one; rack and block are muster's own (GPU clusters group nodes
// into racks behind one switch and blocks of racks behind a spine).
const (
	ZoneLabel  = "topology.kubernetes.io/zone"
	RackLabel  = "muster.io/rack"
	BlockLabel = "muster.io/block"
	// HostnameLabel is the well-known hostname label, set on every node.
	HostnameLabel = "kubernetes.io/hostname"
	// PoolLabel marks the nodes of a pool (NodeSpec.Pool); the pool's taint
	// uses the same key.
	PoolLabel = "muster.io/test-pool"
	// DefaultGPUResource is the extended resource GPUs are counted in.
	DefaultGPUResource = "nvidia.com/gpu"
)

// NodeSpec describes a fake node. Zero values get defaults: 32 CPUs, 256Gi
// memory, 110 pods, no GPUs.
type NodeSpec struct {
	Name        string
	CPU         int // cores
	Memory      string
	Pods        int
	GPUs        int
	GPUResource corev1.ResourceName // default nvidia.com/gpu
	Labels      map[string]string
	Taints      []corev1.Taint
	// Pool, if set, labels the node PoolLabel=Pool and taints it
	// PoolLabel=Pool:NoSchedule, so that only pods with PoolPlacement(Pool)
	// land there. Tests sharing one control plane use pools to keep their
	// nodes to themselves.
	Pool string
}

// Node builds the Node object for s: Ready, allocatable = capacity.
func (s NodeSpec) Node() (*corev1.Node, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("node spec: name is required")
	}
	if s.CPU == 0 {
		s.CPU = 32
	}
	if s.Memory == "" {
		s.Memory = "256Gi"
	}
	if s.Pods == 0 {
		s.Pods = 110
	}
	if s.GPUResource == "" {
		s.GPUResource = DefaultGPUResource
	}
	mem, err := resource.ParseQuantity(s.Memory)
	if err != nil {
		return nil, fmt.Errorf("node %s: memory %q: %w", s.Name, s.Memory, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(s.CPU), resource.DecimalSI),
		corev1.ResourceMemory: mem,
		corev1.ResourcePods:   *resource.NewQuantity(int64(s.Pods), resource.DecimalSI),
	}
	if s.GPUs > 0 {
		capacity[s.GPUResource] = *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
	}
	lbls := map[string]string{HostnameLabel: s.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
	for k, v := range s.Labels {
		lbls[k] = v
	}
	taints := append([]corev1.Taint(nil), s.Taints...)
	if s.Pool != "" {
		lbls[PoolLabel] = s.Pool
		taints = append(taints, corev1.Taint{Key: PoolLabel, Value: s.Pool, Effect: corev1.TaintEffectNoSchedule})
	}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: lbls},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "fake node of the muster harness", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}, nil
}

// CreateNodes creates n nodes, spec(i) describing node i (0-based). The
// apiserver keeps the status given on create, so the nodes are Ready at once.
func (cp *ControlPlane) CreateNodes(ctx context.Context, n int, spec func(i int) NodeSpec) ([]*corev1.Node, error) {
	out := make([]*corev1.Node, 0, n)
	for i := 0; i < n; i++ {
		node, err := spec(i).Node()
		if err != nil {
			return out, err
		}
		created, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return out, fmt.Errorf("create node %s: %w", node.Name, err)
		}
		out = append(out, created)
	}
	return out, nil
}

// DeleteNodes deletes the nodes matching selector (for example
// PoolLabel+"="+pool). Pods bound to them are left alone: there is no pod GC.
func (cp *ControlPlane) DeleteNodes(ctx context.Context, selector string) error {
	if _, err := labels.Parse(selector); err != nil {
		return fmt.Errorf("node selector %q: %w", selector, err)
	}
	err := cp.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete nodes %q: %w", selector, err)
	}
	return nil
}

// Topology spreads nodes over zones, blocks and racks for CreateNodes.
// Zones take contiguous, equal shares of the Nodes nodes (node i is in zone
// i*Zones/Nodes); inside a zone, consecutive nodes fill racks of
// NodesPerRack and consecutive racks fill blocks of RacksPerBlock, so a rack
// or block never spans two zones. Labels of node i, with z its zone and b, r
// its block and rack numbers inside the zone:
//
//	topology.kubernetes.io/zone=zone-<z>
//	muster.io/block=block-<z>-<b>
//	muster.io/rack=rack-<z>-<b>-<r>
type Topology struct {
	Nodes         int // total node count; 0 puts every node in zone-0
	Zones         int // default 1
	NodesPerRack  int // default 4
	RacksPerBlock int // default 2
}

// Labels returns the topology labels of node i.
func (t Topology) Labels(i int) map[string]string {
	zones, perRack, perBlock := t.Zones, t.NodesPerRack, t.RacksPerBlock
	if zones <= 0 || t.Nodes <= 0 {
		zones = 1
	}
	if perRack <= 0 {
		perRack = 4
	}
	if perBlock <= 0 {
		perBlock = 2
	}
	zone, first := 0, 0
	if zones > 1 {
		zone = i * zones / t.Nodes
		// First node of the zone: the smallest k with k*zones/Nodes == zone.
		first = (zone*t.Nodes + zones - 1) / zones
	}
	rack := (i - first) / perRack
	block := rack / perBlock
	return map[string]string{
		ZoneLabel:  fmt.Sprintf("zone-%d", zone),
		BlockLabel: fmt.Sprintf("block-%d-%d", zone, block),
		RackLabel:  fmt.Sprintf("rack-%d-%d-%d", zone, block, rack%perBlock),
	}
}

// Apply returns spec with node i's topology labels merged into its labels.
func (t Topology) Apply(i int, spec NodeSpec) NodeSpec {
	l := make(map[string]string, len(spec.Labels)+3)
	for k, v := range spec.Labels {
		l[k] = v
	}
	for k, v := range t.Labels(i) {
		l[k] = v
	}
	spec.Labels = l
	return spec
}

// GPUNodes is a ready-made spec function for CreateNodes: nodes named
// <prefix>-<i> with gpus GPUs each, spread by topo.
func GPUNodes(prefix string, gpus int, topo Topology) func(i int) NodeSpec {
	return func(i int) NodeSpec {
		return topo.Apply(i, NodeSpec{Name: fmt.Sprintf("%s-%d", prefix, i), GPUs: gpus})
	}
}

// PoolPlacement returns the node selector and toleration a pod needs to run
// on the nodes of pool (NodeSpec.Pool).
func PoolPlacement(pool string) (nodeSelector map[string]string, toleration corev1.Toleration) {
	return map[string]string{PoolLabel: pool},
		corev1.Toleration{Key: PoolLabel, Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}
}
