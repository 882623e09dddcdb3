package definition

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// instSummary is what the tests compare of an instance.
type instSummary struct {
	ID            string
	Replicas      int32
	Min, Max      int32 // -1 when unset
	Pods, MinPods int64
	Image         string
}

func summarizeWorkload(w *Workload) map[string][]instSummary {
	out := map[string][]instSummary{}
	for _, c := range w.Components {
		list := []instSummary{}
		for _, in := range c.Instances {
			s := instSummary{ID: in.ID, Replicas: in.Replicas, Min: -1, Max: -1, Pods: in.Pods, MinPods: in.MinPods}
			if in.MinReplicas != nil {
				s.Min = *in.MinReplicas
			}
			if in.MaxReplicas != nil {
				s.Max = *in.MaxReplicas
			}
			if in.Template != nil && len(in.Template.Spec.Containers) > 0 {
				s.Image = in.Template.Spec.Containers[0].Image
			}
			list = append(list, s)
		}
		out[c.Name] = list
	}
	return out
}

const fragDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: notebook}
spec:
  structureDefinition:
    rootComponent:
      name: notebook
      kind: {group: example.com, version: v1, kind: Notebook}
      scaleDefinition: {replicasPath: .spec.replicas}
      specDefinition:
        fragmentedPodSpecDefinition:
          imagePath: .spec.image
          resourcesPath: .spec.resources
          labelsPath: .spec.podLabels
          annotationsPath: .spec.podAnnotations
          schedulerNamePath: .spec.scheduler
          priorityClassNamePath: .spec.priority
          nodeAffinityPath: .spec.nodeAffinity
          containersPath: .spec.sidecars
          resourceClaimsPath: .spec.claims
  optimizationInstructions:
    gangScheduling:
      podGroup: {}
`

const fragObj = `
apiVersion: example.com/v1
kind: Notebook
metadata: {name: nb, labels: {keep: me}}
spec:
  replicas: 2
  image: jupyter:3
  resources: {limits: {nvidia.com/gpu: 1, memory: 2Gi}}
  podLabels: {team: a}
  scheduler: default-scheduler
  priority: high
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: gpu, operator: Exists}]}]
  sidecars: [{name: proxy, image: envoy}]
  claims: [{name: gpu, resourceClaimName: c}]
  somethingElse: {kept: true}
`

const podSpecDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: split}
spec:
  structureDefinition:
    rootComponent:
      name: job
      kind: {group: example.com, version: v1, kind: Split}
      scaleDefinition: {replicasPath: .spec.count, minReplicasPath: .spec.minCount}
      specDefinition: {podSpecPath: .spec.pod, metadataPath: .spec.podMetadata}
`

func TestExtract(t *testing.T) {
	tests := []struct {
		name, def, obj string
		want           map[string][]instSummary
	}{
		{"replicated jobs", jobsetDef, jobsetObj, map[string][]instSummary{
			// A grouping component has the pods of its children.
			"jobset":        {{Replicas: 1, Min: -1, Max: -1, Pods: 3, MinPods: 3}},
			"replicatedjob": {{ID: "leader", Replicas: 1, Min: -1, Max: -1, Pods: 1, MinPods: 1, Image: "trainer:1"}, {ID: "workers", Replicas: 2, Min: -1, Max: -1, Pods: 2, MinPods: 2, Image: "trainer:1"}},
		}},
		{"a template path that yields null is an absent component", strings.Replace(jobsetDef, ".template.spec.template'", ".template.spec.tempalte'", 1), jobsetObj, map[string][]instSummary{
			"jobset":        {{Replicas: 1, Min: -1, Max: -1, Pods: 0, MinPods: 0}},
			"replicatedjob": {},
		}},
		// The instance path iterates over a list the object does not have
		// (jq: cannot iterate over null): no instances, as in Workload
		// Map, not an error that fails the whole workload.
		{"an instance path over an absent list is an absent component", jobsetDef, "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: train, namespace: ml}\nspec: {}\n", map[string][]instSummary{
			"jobset":        {{Replicas: 1, Min: -1, Max: -1, Pods: 0, MinPods: 0}},
			"replicatedjob": {},
		}},
		{"head and worker groups", rayDef, rayObj, map[string][]instSummary{
			"raycluster": {{Replicas: 1, Min: -1, Max: -1, Pods: 8, MinPods: 3}},
			"head":       {{Replicas: 1, Min: -1, Max: -1, Pods: 1, MinPods: 1, Image: "ray:2"}},
			"workers":    {{ID: "gpu", Replicas: 4, Min: 2, Max: 4, Pods: 4, MinPods: 2, Image: "ray:2"}, {ID: "cpu", Replicas: 3, Min: 0, Max: -1, Pods: 3, MinPods: 0, Image: "ray:2"}},
		}},
		// Counts are totals, not multiplied by the parent's: the root's
		// replicas (2 groups) are not multiplied into the leader's or the
		// worker's, and the root has the sum of its children.
		{"leader/worker counts are totals", lwsDef, lwsObj, map[string][]instSummary{
			"lws":    {{Replicas: 2, Min: -1, Max: -1, Pods: 8, MinPods: 8}},
			"leader": {{Replicas: 2, Min: -1, Max: -1, Pods: 2, MinPods: 2, Image: "vllm:1"}},
			"worker": {{Replicas: 6, Min: -1, Max: -1, Pods: 6, MinPods: 6, Image: "vllm:1"}},
		}},
		{"no worker groups", rayDef, strings.Split(rayObj, "  workerGroupSpecs:")[0], map[string][]instSummary{
			"raycluster": {{Replicas: 1, Min: -1, Max: -1, Pods: 1, MinPods: 1}},
			"head":       {{Replicas: 1, Min: -1, Max: -1, Pods: 1, MinPods: 1, Image: "ray:2"}},
			"workers":    {},
		}},
		{"fragmented", fragDef, fragObj, map[string][]instSummary{
			"notebook": {{Replicas: 2, Min: -1, Max: -1, Pods: 2, MinPods: 2, Image: "jupyter:3"}},
		}},
		// No fragment and no count: the object does not have the
		// component (a Milvus role a standalone Milvus leaves out).
		{"fragmented with nothing there is absent", fragDef, "apiVersion: example.com/v1\nkind: Notebook\nmetadata: {name: nb}\nspec: {}\n", map[string][]instSummary{
			"notebook": {},
		}},
		// A count with no fragment: the template comes from elsewhere (a
		// TrainJob's runtime), the pods are there.
		{"fragmented defaults with a count are there", fragDef, "apiVersion: example.com/v1\nkind: Notebook\nmetadata: {name: nb}\nspec: {replicas: 3}\n", map[string][]instSummary{
			"notebook": {{Replicas: 3, Min: -1, Max: -1, Pods: 3, MinPods: 3}},
		}},
		// podSpecPath yields nothing (select): absent as well.
		{"pod spec path yielding nothing is absent", strings.Replace(podSpecDef, "podSpecPath: .spec.pod,", "podSpecPath: '.spec.pod | select(. != null)',", 1), "apiVersion: example.com/v1\nkind: Split\nmetadata: {name: s}\nspec: {count: 2}\n", map[string][]instSummary{
			"job": {},
		}},
		{"pod spec and metadata, float and string counts", podSpecDef, `
apiVersion: example.com/v1
kind: Split
metadata: {name: s}
spec:
  count: 4.0
  minCount: "2"
  pod: {containers: [{name: c, image: img}]}
`, map[string][]instSummary{
			"job": {{Replicas: 4, Min: 2, Max: -1, Pods: 4, MinPods: 2, Image: "img"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compileT(t, tc.def)
			w, err := c.Extract(ctxT, objT(t, tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summarizeWorkload(w)); diff != "" {
				t.Errorf("workload (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestExtractFragmentedTemplate(t *testing.T) {
	c := compileT(t, fragDef)
	w, err := c.Extract(ctxT, objT(t, fragObj))
	if err != nil {
		t.Fatal(err)
	}
	tpl := w.Components[0].Instances[0].Template
	s := tpl.Spec
	if len(s.Containers) != 1 || s.Containers[0].Name != "proxy" || s.Containers[0].Image != "jupyter:3" {
		t.Fatalf("containers = %+v; the first listed container is the main one", s.Containers)
	}
	if q := s.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 1 {
		t.Errorf("resources not on the main container: %+v", s.Containers[0].Resources)
	}
	if s.SchedulerName != "default-scheduler" || s.PriorityClassName != "high" || tpl.Labels["team"] != "a" {
		t.Errorf("fields missing: %+v %v", s, tpl.Labels)
	}
	if s.Affinity == nil || s.Affinity.NodeAffinity == nil || len(s.ResourceClaims) != 1 {
		t.Errorf("affinity or claims missing: %+v", s)
	}
	if got := GPUs(PodRequests(&s), DefaultGPUResourceNames); got != 1 {
		t.Errorf("GPUs = %d, want 1", got)
	}
}

func TestExtractPodSpecMetadata(t *testing.T) {
	c := compileT(t, podSpecDef)
	w, err := c.Extract(ctxT, objT(t, `
apiVersion: example.com/v1
kind: Split
metadata: {name: s}
spec:
  pod: {containers: [{name: c}], schedulerName: x}
  podMetadata: {labels: {a: b}}
`))
	if err != nil {
		t.Fatal(err)
	}
	tpl := w.Components[0].Instances[0].Template
	if tpl.Labels["a"] != "b" || tpl.Spec.SchedulerName != "x" {
		t.Fatalf("template %+v", tpl)
	}
}

func TestExtractErrors(t *testing.T) {
	tests := []struct {
		name, def, obj string
		want           []string
	}{
		{"count mismatch", strings.Replace(jobsetDef, "replicasPath: .spec.replicatedJobs[] | (.replicas // 1) * (.template.spec.parallelism // 1)", "replicasPath: '1, 2, 3'", 1), jobsetObj,
			[]string{`component "replicatedjob"`, "replicasPath", "yields 3 values for 2 instances"}},
		{"replicas not a number", podSpecDef, "apiVersion: example.com/v1\nkind: Split\nmetadata: {name: s}\nspec: {count: many, pod: {containers: [{name: c}]}}\n",
			[]string{`component "job"`, "replicasPath", `replica count "many" is not a whole number`}},
		{"negative replicas", podSpecDef, "apiVersion: example.com/v1\nkind: Split\nmetadata: {name: s}\nspec: {count: -1, pod: {containers: [{name: c}]}}\n",
			[]string{"negative"}},
		{"template field of the wrong type", podSpecDef, "apiVersion: example.com/v1\nkind: Split\nmetadata: {name: s}\nspec: {pod: {containers: {name: c}}}\n",
			[]string{`component "job"`, "not a valid pod template", "specDefinition"}},
		{"spec not an object", podSpecDef, "apiVersion: example.com/v1\nkind: Split\nmetadata: {name: s}\nspec: {pod: [1]}\n",
			[]string{`component "job"`, "podSpecPath", "yields a array, want an object"}},
		{"path on the wrong type", jobsetDef, "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: j}\nspec: {replicatedJobs: 3}\n",
			[]string{`component "replicatedjob"`, "instanceIdPath", "cannot iterate over"}},
		{"duplicate instance ids", jobsetDef, strings.Replace(jobsetObj, "name: workers", "name: leader", 1),
			[]string{"instance id appears twice"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compileT(t, tc.def)
			_, err := c.Extract(ctxT, objT(t, tc.obj))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// A child instance belongs to the parent instance with its id; with
// several parent instances and no such id, extraction fails.
func TestExtractParentInstance(t *testing.T) {
	def := `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: tree}
spec:
  structureDefinition:
    rootComponent: {name: r, kind: {group: example.com, version: v1, kind: T}}
    childComponents:
      - {name: group, ownerRef: r, instanceIdPath: '.spec.groups[].name', scaleDefinition: {replicasPath: '.spec.groups[].count'}}
      - name: pods
        ownerRef: group
        instanceIdPath: '.spec.pods[].group'
        scaleDefinition: {replicasPath: '.spec.pods[].count'}
        specDefinition: {podTemplateSpecPath: '.spec.template'}
        podSelector: {componentInstanceSelector: {idPath: .metadata.labels.g}}
`
	c := compileT(t, def)
	w, err := c.Extract(ctxT, objT(t, `
apiVersion: example.com/v1
kind: T
metadata: {name: t}
spec:
  template: {spec: {containers: [{name: c}]}}
  groups: [{name: a, count: 2}, {name: b, count: 3}]
  pods: [{group: b, count: 5}, {group: a, count: 1}]
`))
	if err != nil {
		t.Fatal(err)
	}
	// Counts are not multiplied by the parent's; the groups have the sum
	// of their children.
	sum := summarizeWorkload(w)
	if got := sum["pods"]; got[0].Pods != 5 || got[1].Pods != 1 {
		t.Errorf("pods = %+v, want b:5 a:1", got)
	}
	if got := sum["group"]; got[0].Pods != 1 || got[1].Pods != 5 {
		t.Errorf("groups = %+v, want a:1 b:5", got)
	}
	_, err = c.Extract(ctxT, objT(t, `
apiVersion: example.com/v1
kind: T
metadata: {name: t}
spec:
  template: {spec: {containers: [{name: c}]}}
  groups: [{name: a, count: 2}, {name: b, count: 3}]
  pods: [{group: z, count: 5}]
`))
	if err == nil || !strings.Contains(err.Error(), `none has id "z"`) {
		t.Fatalf("error = %v", err)
	}
}
