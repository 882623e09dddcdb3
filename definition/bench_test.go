package definition

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// BenchmarkGangForPod measures the pod-grouping question (MatchPod +
// GangForPod, as the pod-grouper asks it per pod event) on a replicated-jobs
// workload.
//
//   - compiled is the pod-grouper's steady state: the root object is the
//     same version (the plan cache hits) and every iteration asks about a
//     different pod, so nothing pod-side is reused between iterations.
//   - parse-per-call is the same work with every expression it evaluates
//     parsed and compiled first and run through gojq (no plain path read by
//     hand), to show what compiling once saves (see podEvaluations).
//   - compiled-new-root also re-reads the root object on every call (an
//     object without resourceVersion, so the plan cache never hits): the
//     cost of the first pod after a workload changes.
//   - multinode/* do the same on a leader/worker definition whose pod
//     selectors need jq (comparisons, select) and whose gang is grouped.
//
// evals/cpu-s divides by the CPU time the process used, the per-core figure
// on a shared machine; evals/s by wall time.
func BenchmarkGangForPod(b *testing.B) {
	cached := objT(b, jobsetObj) // has uid and resourceVersion
	uncached := cached.DeepCopy()
	uncached.SetResourceVersion("")
	nimRoot := objT(b, nimLikeObj)
	for _, bc := range []struct {
		name         string
		def          string
		pods         []*corev1.Pod
		root         *unstructured.Unstructured
		parsePerCall bool
		minMember    int32
	}{
		{"compiled", jobsetDef, benchPods(256), cached, false, 3},
		{"parse-per-call", jobsetDef, benchPods(256), cached, true, 3},
		{"compiled-new-root", jobsetDef, benchPods(256), uncached, false, 3},
		// Pod-side paths that need gojq (comparisons, select) and a grouped
		// gang.
		{"multinode/compiled", nimLikeDef, nimLikePods(256), nimRoot, false, 4},
		{"multinode/parse-per-call", nimLikeDef, nimLikePods(256), nimRoot, true, 4},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := compileT(b, bc.def)
			var evaluations [][]*expr
			if bc.parsePerCall {
				evaluations = podEvaluations(b, c, bc.root, bc.pods)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			i := 0
			for b.Loop() {
				pod := bc.pods[i%len(bc.pods)]
				if bc.parsePerCall {
					recompile(b, evaluations[i%len(bc.pods)])
				}
				i++
				if _, err := c.MatchPod(ctxT, pod); err != nil {
					b.Fatal(err)
				}
				g, err := c.GangForPod(ctxT, bc.root, pod)
				if err != nil || g.MinMember != bc.minMember {
					b.Fatalf("gang %v err %v", g, err)
				}
			}
			// Per core: the machine is shared, so divide by the CPU time
			// this process used (GC included) as well as by wall time.
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(b.N)/cpu.Seconds(), "evals/cpu-s")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
		})
	}
}

// podEvaluations makes c's pod-side expressions take the general path (jq
// runs every evaluation; no plain path is walked by hand, no pod field read
// directly) and returns, per pod, the expressions one MatchPod + GangForPod
// evaluates, once per evaluation. Replaying those with recompile before each
// call is the work of an engine that parses and compiles every expression
// it runs.
func podEvaluations(b *testing.B, c *Compiled, root *unstructured.Unstructured, pods []*corev1.Pod) [][]*expr {
	var ran []*expr
	seen := map[*expr]bool{}
	for _, e := range c.podExprs() {
		if e == nil || seen[e] {
			continue
		}
		seen[e] = true
		e.simple, e.pod = false, podFieldNone
	}
	// onEval notes each pod-side expression as it runs; the results are
	// unchanged.
	c.onEval = func(e *expr) {
		if seen[e] {
			ran = append(ran, e)
		}
	}
	defer func() { c.onEval = nil }()
	perPod := make([][]*expr, len(pods))
	for i, pod := range pods {
		ran = nil
		if _, err := c.MatchPod(ctxT, pod); err != nil {
			b.Fatal(err)
		}
		if _, err := c.GangForPod(ctxT, root, pod); err != nil {
			b.Fatal(err)
		}
		perPod[i] = ran
	}
	return perPod
}

// recompile compiles exprs again as Compile does (parse, check, guard,
// compile), the work compiling once saves.
func recompile(b *testing.B, exprs []*expr) {
	for _, e := range exprs {
		fresh, fe := compileJQ(field.NewPath("bench"), e.src)
		if fe != nil {
			b.Fatal(fe)
		}
		e.code = fresh.code
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nimLikeDef has the shape of a model server that runs either on one node
// or as leader/worker groups, with pod selectors that need comparisons.
const nimLikeDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: nimlike}
spec:
  structureDefinition:
    rootComponent:
      name: svc
      kind: {group: example.com, version: v1, kind: Svc}
    childComponents:
      - name: server
        ownerRef: svc
        instanceIdPath: select(.spec.multiNode == null) | .metadata.name
        specDefinition:
          fragmentedPodSpecDefinition: {resourcesPath: .spec.resources, schedulerNamePath: .spec.schedulerName}
        scaleDefinition: {replicasPath: .spec.replicas // 1}
        podSelector:
          componentTypeSelector:
            keyPath: .metadata.labels["leaderworkerset.sigs.k8s.io/name"] == null and .metadata.labels.app != null
          componentInstanceSelector: {idPath: .metadata.labels.app}
      - name: group
        ownerRef: svc
        instanceIdPath: select(.spec.multiNode != null) | .metadata.name + "-lws"
        scaleDefinition: {replicasPath: .spec.replicas // 1}
      - name: leader
        ownerRef: group
        instanceIdPath: select(.spec.multiNode != null) | .metadata.name + "-lws"
        specDefinition:
          fragmentedPodSpecDefinition: {resourcesPath: .spec.resources, schedulerNamePath: .spec.schedulerName}
        podSelector:
          componentTypeSelector:
            keyPath: .metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"]
            value: "0"
          componentInstanceSelector: {idPath: '.metadata.labels["leaderworkerset.sigs.k8s.io/name"]'}
          replicaSelector: {keyPath: '.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]'}
        scaleDefinition: {replicasPath: .spec.replicas // 1}
      - name: worker
        ownerRef: group
        instanceIdPath: select(.spec.multiNode != null) | .metadata.name + "-lws"
        specDefinition:
          fragmentedPodSpecDefinition: {resourcesPath: .spec.resources}
        scaleDefinition: {replicasPath: (.spec.replicas // 1) * ((.spec.multiNode.size // 1) - 1)}
        podSelector:
          componentTypeSelector:
            keyPath: .metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"] | select(. != null and . != "0")
          componentInstanceSelector: {idPath: '.metadata.labels["leaderworkerset.sigs.k8s.io/name"]'}
          replicaSelector: {keyPath: '.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]'}
  optimizationInstructions:
    gangScheduling:
      podGroups:
        - name: lws-group
          members:
            - componentName: leader
              groupByKeyPaths: ['.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]']
            - componentName: worker
              groupByKeyPaths: ['.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]']
`

const nimLikeObj = `
apiVersion: example.com/v1
kind: Svc
metadata: {name: llm, namespace: serve, uid: u-2, resourceVersion: "9"}
spec:
  replicas: 2
  schedulerName: muster
  resources: {limits: {nvidia.com/gpu: 8}}
  multiNode: {size: 4}
`

// nimLikePods are the leader and worker pods of nimLikeObj's groups, with
// the labels a leader/worker controller gives them.
func nimLikePods(n int) []*corev1.Pod {
	pods := benchPods(n)
	for i, p := range pods {
		g, w := (i/4)%2, i%4
		p.Name = fmt.Sprintf("llm-lws-%d-%d", g, w)
		p.Labels = map[string]string{
			"leaderworkerset.sigs.k8s.io/name":         "llm-lws",
			"leaderworkerset.sigs.k8s.io/group-index":  fmt.Sprint(g),
			"leaderworkerset.sigs.k8s.io/worker-index": fmt.Sprint(w),
			"leaderworkerset.sigs.k8s.io/group-key":    "0123456789abcdef",
		}
		if w == 0 {
			p.Labels["app"] = "llm-lws"
		}
	}
	return pods
}

// benchPods makes n distinct pods of the jobset workload shaped like pods
// from an informer: UID, resourceVersion, owner reference, annotations, a
// realistic spec and status.
func benchPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		job := "workers"
		if i%3 == 0 {
			job = "leader"
		}
		p := podT(fmt.Sprintf("train-%s-0-%d", job, i), "jobset.sigs.k8s.io/jobset-name=train",
			"jobset.sigs.k8s.io/replicatedjob-name="+job, "jobset.sigs.k8s.io/job-index=0",
			fmt.Sprintf("batch.kubernetes.io/job-completion-index=%d", i), "batch.kubernetes.io/controller-uid=c0ffee")
		p.UID = types.UID(fmt.Sprintf("pod-uid-%d", i))
		p.ResourceVersion = fmt.Sprint(1000 + i)
		p.Annotations = map[string]string{"batch.kubernetes.io/job-completion-index": fmt.Sprint(i), "jobset.sigs.k8s.io/job-key": "abc"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train-" + job + "-0", UID: "job-uid"}}
		p.CreationTimestamp = metav1.Unix(1700000000, 0)
		p.Spec.Containers = benchPodContainers()
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")},
		}
		p.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}}
		pods[i] = p
	}
	return pods
}
