package localcluster

import (
	"fmt"
	"strings"
)

// KueueQueues describes the queues KueueQueuesYAML writes for the real
// Kueue (operator "kueue"): one ResourceFlavor, one ClusterQueue of that
// flavor and one LocalQueue.
type KueueQueues struct {
	// ClusterQueue names the ClusterQueue and its ResourceFlavor.
	ClusterQueue string
	// Namespace and LocalQueue place the LocalQueue that points at the
	// ClusterQueue; the ClusterQueue admits from every namespace.
	Namespace, LocalQueue string
	// GPUs is the ClusterQueue's nominal quota of GPUResource (default
	// nvidia.com/gpu). CPU and memory are covered with quota no test
	// reaches: Kueue admits nothing that asks for a resource its
	// ClusterQueue does not cover.
	GPUs        int
	GPUResource string
	// PreemptLowerPriority lets a workload preempt lower-priority ones of
	// its own ClusterQueue (withinClusterQueue: LowerPriority); otherwise
	// Kueue's default, Never.
	PreemptLowerPriority bool
}

// KueueQueuesYAML returns the ResourceFlavor, ClusterQueue and LocalQueue
// of q as YAML documents for ControlPlane.Apply.
func KueueQueuesYAML(q KueueQueues) string {
	gpu := q.GPUResource
	if gpu == "" {
		gpu = "nvidia.com/gpu"
	}
	preemption := ""
	if q.PreemptLowerPriority {
		preemption = "  preemption: {withinClusterQueue: LowerPriority}\n"
	}
	return strings.TrimLeft(fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector: {}
%[6]s  resourceGroups:
  - coveredResources: [cpu, memory, %[4]s]
    flavors:
    - name: %[1]s
      resources:
      - {name: cpu, nominalQuota: "100000"}
      - {name: memory, nominalQuota: 100000Gi}
      - {name: %[4]s, nominalQuota: %[5]d}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %[3]s, namespace: %[2]s}
spec: {clusterQueue: %[1]s}
`, q.ClusterQueue, q.Namespace, q.LocalQueue, gpu, q.GPUs, preemption), "\n")
}
