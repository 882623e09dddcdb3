package localcluster

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	// TopologyLevels, when set, make the flavor topology-aware: a Kueue
	// Topology of these node labels (outermost first), named as the
	// ClusterQueue, that the flavor names; FlavorNodeLabels and
	// FlavorTolerations are the flavor's nodeLabels and tolerations (the
	// nodes Kueue's topology-aware scheduling counts, a pool's taint).
	TopologyLevels    []string
	FlavorNodeLabels  map[string]string
	FlavorTolerations []corev1.Toleration
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
	flavor := ""
	if len(q.TopologyLevels) > 0 {
		var levels []string
		for _, l := range q.TopologyLevels {
			levels = append(levels, "{nodeLabel: "+strconv.Quote(l)+"}")
		}
		flavor = fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: %s}\nspec: {levels: [%s]}\n---\n", q.ClusterQueue, strings.Join(levels, ", "))
	}
	spec := map[string]any{}
	if len(q.TopologyLevels) > 0 {
		spec["topologyName"] = q.ClusterQueue
	}
	if len(q.FlavorNodeLabels) > 0 {
		spec["nodeLabels"] = q.FlavorNodeLabels
	}
	if len(q.FlavorTolerations) > 0 {
		spec["tolerations"] = q.FlavorTolerations
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		panic(err) // strings, maps of strings and tolerations always marshal
	}
	flavor += fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: %s}\nspec: %s\n", q.ClusterQueue, specJSON)
	return flavor + strings.TrimLeft(fmt.Sprintf(`---
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
