package definition

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

// Definitions and objects the tests share. They model the shapes of real
// workload kinds (a replicated-jobs batch kind, a leader/worker kind, a
// head/worker-groups kind) without depending on any catalog file.

const jobsetDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: jobset}
spec:
  structureDefinition:
    rootComponent:
      name: jobset
      kind: {group: jobset.x-k8s.io, version: v1alpha2, kind: JobSet}
      statusDefinition:
        conditionsDefinition: {path: .status.conditions}
        statusMappings:
          completed: [{byConditions: [{type: Completed, status: "True"}]}]
          failed: [{byConditions: [{type: Failed, status: "True"}]}]
          suspended: [{byExpression: {expression: ".spec.suspend // false", expectedResult: "true"}}]
          running:
            - byExpression: {expression: "([.status.replicatedJobsStatus[]?.active] | add // 0) > 0", expectedResult: "true"}
    childComponents:
      - name: replicatedjob
        ownerRef: jobset
        instanceIdPath: .spec.replicatedJobs[].name
        specDefinition: {podTemplateSpecPath: '.spec.replicatedJobs[].template.spec.template'}
        scaleDefinition:
          replicasPath: .spec.replicatedJobs[] | (.replicas // 1) * (.template.spec.parallelism // 1)
        podSelector:
          componentTypeSelector: {keyPath: '.metadata.labels["jobset.sigs.k8s.io/jobset-name"]'}
          componentInstanceSelector: {idPath: '.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]'}
          replicaSelector: {keyPath: '.metadata.labels["jobset.sigs.k8s.io/job-index"]'}
  optimizationInstructions:
    gangScheduling:
      podGroups:
        - name: jobset
          members: [{componentName: replicatedjob}]
`

const jobsetObj = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train, namespace: ml, uid: u-1, resourceVersion: "7"}
spec:
  replicatedJobs:
    - name: leader
      replicas: 1
      template:
        spec:
          parallelism: 1
          template:
            metadata: {labels: {role: leader}}
            spec:
              containers:
                - name: main
                  image: trainer:1
                  resources:
                    limits: {nvidia.com/gpu: 4, cpu: "2"}
    - name: workers
      replicas: 1
      template:
        spec:
          parallelism: 2
          completions: 2
          template:
            spec:
              containers:
                - name: main
                  image: trainer:1
                  ports: [{containerPort: 8080}]
                  resources:
                    requests: {cpu: "1", memory: 1Gi}
                    limits: {nvidia.com/gpu: 4}
status:
  conditions:
    - {type: Completed, status: "False"}
  replicatedJobsStatus:
    - {name: leader, active: 1}
`

const lwsDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: lws}
spec:
  structureDefinition:
    rootComponent:
      name: lws
      kind: {group: leaderworkerset.x-k8s.io, version: v1, kind: LeaderWorkerSet}
      scaleDefinition: {replicasPath: .spec.replicas}
      podSelector:
        replicaSelector: {keyPath: '.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]'}
    childComponents:
      - name: leader
        ownerRef: lws
        specDefinition:
          podTemplateSpecPath: .spec.leaderWorkerTemplate.leaderTemplate // .spec.leaderWorkerTemplate.workerTemplate
        scaleDefinition: {replicasPath: .spec.replicas}
        podSelector:
          componentTypeSelector:
            keyPath: '.metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"]'
            value: "0"
      - name: worker
        ownerRef: lws
        specDefinition: {podTemplateSpecPath: .spec.leaderWorkerTemplate.workerTemplate}
        scaleDefinition: {replicasPath: .spec.replicas * (.spec.leaderWorkerTemplate.size - 1)}
        podSelector:
          componentTypeSelector:
            keyPath: '.metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"]'
  optimizationInstructions:
    gangScheduling:
      podGroups:
        - name: group
          members:
            - componentName: leader
              groupByKeyPaths: ['.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]']
            - componentName: worker
              groupByKeyPaths: ['.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]']
`

const lwsObj = `
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: vllm, namespace: serve}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 4
    workerTemplate:
      spec:
        containers:
          - name: vllm
            image: vllm:1
            resources: {limits: {nvidia.com/gpu: "8"}}
`

const rayDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: raycluster}
spec:
  structureDefinition:
    rootComponent:
      name: raycluster
      kind: {group: ray.io, version: v1, kind: RayCluster}
    childComponents:
      - name: head
        ownerRef: raycluster
        specDefinition: {podTemplateSpecPath: .spec.headGroupSpec.template}
        podSelector:
          componentTypeSelector: {keyPath: '.metadata.labels["ray.io/node-type"]', value: head}
      - name: workers
        ownerRef: raycluster
        instanceIdPath: .spec.workerGroupSpecs[]?.groupName
        specDefinition: {podTemplateSpecPath: '.spec.workerGroupSpecs[]?.template'}
        scaleDefinition:
          replicasPath: '.spec.workerGroupSpecs[]? | (.replicas // 1) * (.numOfHosts // 1)'
          minReplicasPath: '.spec.workerGroupSpecs[]? | (.minReplicas // 0) * (.numOfHosts // 1)'
          maxReplicasPath: '.spec.workerGroupSpecs[]? | .maxReplicas'
        podSelector:
          componentTypeSelector: {keyPath: '.metadata.labels["ray.io/node-type"]', value: worker}
          componentInstanceSelector: {idPath: '.metadata.labels["ray.io/group"]'}
  optimizationInstructions:
    gangScheduling:
      podGroup:
        topology: {requiredTopologyLevel: topology.kubernetes.io/zone}
        subGroups:
          - componentName: head
          - componentName: workers
`

const rayObj = `
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: rc, namespace: ray}
spec:
  headGroupSpec:
    template:
      spec:
        containers: [{name: head, image: ray:2, resources: {requests: {cpu: "2"}}}]
  workerGroupSpecs:
    - groupName: gpu
      replicas: 2
      minReplicas: 1
      maxReplicas: 4
      numOfHosts: 2
      template:
        spec:
          containers: [{name: w, image: ray:2, resources: {limits: {nvidia.com/gpu: "1"}}}]
    - groupName: cpu
      replicas: "3"
      template:
        spec:
          containers: [{name: w, image: ray:2, resources: {requests: {cpu: "4"}}}]
`

func decodeT(t testing.TB, s string) *kartav1alpha1.Karta {
	t.Helper()
	k, err := Decode([]byte(s))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return k
}

func compileT(t testing.TB, s string) *Compiled {
	t.Helper()
	// A generous deadline: the shared test machine can starve a goroutine
	// for longer than the default. The runaway tests set their own.
	c, err := Compile(decodeT(t, s), Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

func objT(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

// podT builds a pod from "key=value" labels.
func podT(name string, labels ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{}}}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		p.Labels[k] = v
	}
	return p
}

func withAnnotations(u *unstructured.Unstructured, kv ...string) *unstructured.Unstructured {
	u = u.DeepCopy()
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		ann[kv[i]] = kv[i+1]
	}
	u.SetAnnotations(ann)
	return u
}

var ctxT = context.Background()

// benchPodContainers makes the benchmark pod as big as a real one.
func benchPodContainers() []corev1.Container {
	return []corev1.Container{{
		Name: "main", Image: "trainer:1", Command: []string{"python", "train.py"},
		Env:   []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "C", Value: "3"}},
		Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
	}}
}
