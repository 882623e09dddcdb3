package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/definition/jq/schemacheck"
)

// corpusDir is ../shared/corpus relative to the module root, or "" when it
// is not there (a fresh clone).
func corpusDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	c := filepath.Join(dir, "..", "shared", "corpus")
	if _, err := os.Stat(c); err != nil {
		return ""
	}
	return c
}

// exampleWant is what an upstream example must resolve to, derived by hand
// from the example and stated here.
type exampleWant struct {
	pods, gpus int64
	// gangs is every GangPlan as "<gang>:<instances>x<minMember>", in order.
	gangs string
}

// corpusExamples lists, per framework folder, every upstream example document
// of a kind the catalog defines, keyed "<file>#<name or generateName>".
var corpusExamples = map[string]map[string]exampleWant{
	"jobset": {
		// initializer 1 + launcher 1 + worker parallelism 4 = 6 pods; launcher
		// and worker have dependsOn, so only the initializer is required.
		"depends-on.yaml#depends-on": {pods: 6, gpus: 0, gangs: "jobset:1x1"},
		// workers 4 + driver 1.
		"paralleljobs.yaml#paralleljobs": {pods: 5, gpus: 0, gangs: "jobset:1x5"},
		// 2 slices x parallelism 4 = 8 pods; TPUs are not GPUs.
		"v6e-jax-workload.yaml#v6e-multislice": {pods: 8, gpus: 0, gangs: "jobset:1x8"},
		// 3 Jobs x parallelism 2 = 6, as the WAS PodGroup's minCount says.
		"workload-aware-scheduling/jobset.yaml#js": {pods: 6, gpus: 0, gangs: "jobset:1x6"},
	},
	"pytorchjob": {
		// Worker 2, elastic minReplicas 1.
		"imagenet.yaml#elastic-example-imagenet": {pods: 2, gpus: 0, gangs: "pytorchjob:1x1"},
		// Master 1 + Worker 1, 1 GPU each.
		"pytorch_deepspeed_demo.yaml#pytorch-deepspeed-demo":  {pods: 2, gpus: 2, gangs: "pytorchjob:1x2"},
		"pytorch_job_mnist_nccl.yaml#pytorch-dist-mnist-nccl": {pods: 2, gpus: 2, gangs: "pytorchjob:1x2"},
		"simple.yaml#pytorch-simple":                          {pods: 2, gpus: 0, gangs: "pytorchjob:1x2"},
	},
	"mpijob": {
		// Launcher 1 + Worker 2 (AtStartup by default: the launcher counts).
		"pi.yaml#pi": {pods: 3, gpus: 0, gangs: "mpijob:1x3"},
		// Workers 2 x 1 GPU.
		"tensorflow-benchmarks.yaml#tensorflow-benchmarks": {pods: 3, gpus: 2, gangs: "mpijob:1x3"},
		"tensorflow-mnist.yaml#tensorflow-mnist":           {pods: 3, gpus: 0, gangs: "mpijob:1x3"},
	},
	"trainjob": {
		// numNodes 3, no resourcesPerNode.
		"01-multi-node.yaml#multi-node-example": {pods: 3, gpus: 0, gangs: "trainer:1x3"},
		// numNodes 4 (the runtime document is not a TrainJob).
		"04-volcano-integration.yaml#volcano-example": {pods: 4, gpus: 0, gangs: "trainer:1x4"},
	},
	"ray": {
		// head + worker clamp(2, 2, max) = 3.
		"ray-cluster.kai-scheduler.yaml#raycluster-sample": {pods: 3, gpus: 0, gangs: "raycluster:1x3"},
		// head + 1 replica x numOfHosts 4 = 5 (TPUs are not GPUs).
		"ray-cluster.tpu-v6e-16-multihost.yaml#raycluster-tpu-v6e-multihost": {pods: 5, gpus: 0, gangs: "raycluster:1x5"},
		// head + 4 workers x 1 GPU; the submitter is not in the gang.
		"ray-job.pytorch-image-classifier.yaml#pytorch-image-classifier-": {pods: 5, gpus: 4, gangs: "raycluster:1x5"},
		// head + 1 worker x 4 GPUs.
		"ray-service.llm-serve.yaml#ray-serve-llm": {pods: 2, gpus: 4, gangs: "raycluster:1x2"},
	},
	"lws": {
		// 3 groups x size 4.
		"lws-multi-template.yaml#leaderworkerset-multi-template": {pods: 12, gpus: 0, gangs: "group:3x4"},
		"lws-sample-volcano.yaml#lws-sample-volcano":             {pods: 8, gpus: 0, gangs: "group:2x4"},
		// 2 groups x size 2, 1 GPU per pod.
		"sglang/lws.yaml#sglang": {pods: 4, gpus: 4, gangs: "group:2x2"},
		// 2 groups x size 2, 8 GPUs per pod.
		"vllm-GPU/lws.yaml#vllm": {pods: 4, gpus: 32, gangs: "group:2x2"},
	},
	"grove": {
		// prefill 2 x (1 + 4) + decode 1 x (1 + 2) = 13; base gang: 1 x 5 + 1 x 3 = 8.
		"multi-node-disaggregated.yaml#multinode-disaggregated": {pods: 13, gpus: 0, gangs: "replica:1x8"},
		// frontend 2 + prefill 2 x (1 + 3) + decode 1 x (1 + 2) = 13; base: 2 + 4 + 3 = 9.
		"multinode-disaggregated-with-frontend.yaml#mn-disagg": {pods: 13, gpus: 0, gangs: "replica:1x9"},
		// pca 3 + sga 1 x (2 + 2) + pcd 2 = 9.
		"simple1.yaml#simple1": {pods: 9, gpus: 0, gangs: "replica:1x9"},
		"single-node-disaggregated.yaml#single-node-disaggregated": {pods: 5, gpus: 0, gangs: "replica:1x5"},
	},
	"dynamo": {
		// Frontend 1 + worker 1 (1 GPU); no multinode service, no gang.
		"vllm/agg.yaml#vllm-agg": {pods: 2, gpus: 1, gangs: ""},
		// Frontend + decode + prefill, 1 GPU each worker.
		"vllm/disagg.yaml#vllm-disagg": {pods: 3, gpus: 2, gangs: ""},
		// Frontend 1 + decode 1 x 2 + prefill 1 x 2 = 5; 4 hosts x 1 GPU; two
		// multinode replicas of nodeCount 2 (same size, one plan).
		"vllm/disagg-multinode.yaml#vllm-disagg": {pods: 5, gpus: 4, gangs: "multinode-replica:2x2"},
		// Same shape with 4 GPUs per host.
		"trtllm/disagg-multinode.yaml#trtllm-disagg-tp8": {pods: 5, gpus: 16, gangs: "multinode-replica:2x2"},
	},
}

// TestCorpusExamples decodes every upstream example of the frameworks above
// and checks what the catalog finds in it against the hand-derived values.
func TestCorpusExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluates every upstream example of the corpus; not in -short")
	}
	corpus := corpusDir(t)
	if corpus == "" {
		t.Skip("../shared/corpus is not present")
	}
	reg := newTestRegistry(t)
	ctx := context.Background()
	for fw, wants := range corpusExamples {
		t.Run(fw, func(t *testing.T) {
			seen := map[string]bool{}
			root := filepath.Join(corpus, fw, "examples")
			err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
					return err
				}
				rel, _ := filepath.Rel(root, path)
				for _, doc := range readDocs(t, path) {
					obj := &unstructured.Unstructured{Object: doc}
					e, ok := reg.LookupGVK(obj.GroupVersionKind())
					if !ok {
						continue
					}
					name := obj.GetName()
					if name == "" {
						name = obj.GetGenerateName()
					}
					key := rel + "#" + name
					seen[key] = true
					want, ok := wants[key]
					if !ok {
						t.Errorf("%s: %s %s has no hand-derived expectation in corpusExamples", key, obj.GetKind(), name)
						continue
					}
					got, err := resolve(ctx, e.Compiled, obj)
					if err != nil {
						t.Errorf("%s (definition %s): %v", key, e.Name, err)
						continue
					}
					if got != want {
						t.Errorf("%s (definition %s): got pods %d gpus %d gangs %q, want pods %d gpus %d gangs %q",
							key, e.Name, got.pods, got.gpus, got.gangs, want.pods, want.gpus, want.gangs)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for key := range wants {
				if !seen[key] {
					t.Errorf("%s: listed in corpusExamples but not found in %s", key, root)
				}
			}
		})
	}
}

func resolve(ctx context.Context, c *definition.Compiled, obj *unstructured.Unstructured) (exampleWant, error) {
	var out exampleWant
	w, err := c.Extract(ctx, obj)
	if err != nil {
		return out, fmt.Errorf("Extract: %w", err)
	}
	for _, comp := range w.Components {
		if !comp.HasPods {
			continue
		}
		for _, in := range comp.Instances {
			out.pods += in.Pods
			out.gpus += in.Pods * definition.GPUs(definition.PodRequests(&in.Template.Spec), definition.DefaultGPUResourceNames)
		}
	}
	plans, err := c.GangPlans(ctx, obj)
	if err != nil {
		return out, fmt.Errorf("GangPlans: %w", err)
	}
	var gs []string
	for _, p := range plans {
		gs = append(gs, fmt.Sprintf("%s:%dx%d", p.Definition, p.Instances, p.MinMember))
	}
	out.gangs = strings.Join(gs, ",")
	return out, nil
}

// coreTypes are the root kinds without a CRD, checked against their Go types.
var coreTypes = map[schema.GroupKind]reflect.Type{
	{Group: "batch", Kind: "Job"}:        reflect.TypeFor[batchv1.Job](),
	{Group: "batch", Kind: "CronJob"}:    reflect.TypeFor[batchv1.CronJob](),
	{Group: "apps", Kind: "Deployment"}:  reflect.TypeFor[appsv1.Deployment](),
	{Group: "apps", Kind: "StatefulSet"}: reflect.TypeFor[appsv1.StatefulSet](),
	{Group: "", Kind: "Pod"}:             reflect.TypeFor[corev1.Pod](),
}

// TestDefinitionPathsInSchema walks every path of every embedded definition
// against the OpenAPI schema of the root kind's version (from the corpus
// CRD, or the Go type for core kinds) and pod-level paths against the Pod
// type, and reports each field the schema does not have.
func TestDefinitionPathsInSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("checks every path of every definition against the corpus CRDs; not in -short")
	}
	corpus := corpusDir(t)
	if corpus == "" {
		t.Skip("../shared/corpus is not present")
	}
	crds := loadCRDs(t, corpus)
	kartas, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kartas {
		t.Run(k.Name, func(t *testing.T) {
			rk := k.Spec.StructureDefinition.RootComponent.Kind
			gk := schema.GroupKind{Group: rk.Group, Kind: rk.Kind}
			var root *apiextensionsv1.JSONSchemaProps
			if typ, ok := coreTypes[gk]; ok {
				root = schemacheck.FromGoType(typ)
			} else {
				if why, absent := crdNotInCorpus[k.Name]; absent {
					t.Skipf("no CRD for %v %s in the corpus: %s", gk, rk.Version, why)
				}
				crd, ok := crds[gk]
				if m, fromModule := moduleCRDs[k.Name]; !ok && fromModule {
					var why string
					if crd, why = loadModuleCRD(t, m, gk); crd == nil {
						t.Skipf("no CRD for %v in the corpus, and %s", gk, why)
					}
					ok = true
				}
				if !ok {
					t.Fatalf("no CRD for %v in the corpus", gk)
				}
				for _, v := range crd.Spec.Versions {
					if v.Name != rk.Version {
						continue
					}
					if !v.Served {
						t.Fatalf("version %s of %v is not served", rk.Version, gk)
					}
					if v.Schema != nil {
						root = v.Schema.OpenAPIV3Schema
					}
				}
				if root == nil {
					t.Fatalf("the CRD of %v has no schema for version %s", gk, rk.Version)
				}
			}
			for _, p := range schemaProblems(k, root) {
				t.Error(p)
			}
		})
	}
}

// crdNotInCorpus are definitions whose CRD the corpus does not hold, with
// why; their paths are proven by the fixtures and the recorded flows only.
var crdNotInCorpus = map[string]string{
	"sandbox": "agent-sandbox's CRD was not copied; the recorded Sandbox flows (workload-map/recorded/agent-sandbox) are replayed instead",
	"dynamographdeployment-v1beta1": "the corpus copy of the Dynamo CRD (Dynamo 1.1) serves v1alpha1 only; " +
		"TestVersionFallbackRefusesMovedFields checks the v1alpha1 definition is refused on the v1beta1 shape",
}

type defPath struct {
	field, expr string
	onPod       bool
}

// definitionPaths lists every jq expression of k with its field path.
func definitionPaths(k *kartav1alpha1.Karta) []defPath {
	var out []defPath
	add := func(field string, s *string, onPod bool) {
		if s != nil && strings.TrimSpace(*s) != "" {
			out = append(out, defPath{field, *s, onPod})
		}
	}
	sd := k.Spec.StructureDefinition
	comps := append([]kartav1alpha1.ComponentDefinition{sd.RootComponent}, sd.ChildComponents...)
	for i, c := range comps {
		f := fmt.Sprintf("childComponents[%d](%s)", i-1, c.Name)
		if i == 0 {
			f = "rootComponent"
		}
		add(f+".instanceIdPath", c.InstanceIDPath, false)
		if s := c.SpecDefinition; s != nil {
			add(f+".specDefinition.podTemplateSpecPath", s.PodTemplateSpecPath, false)
			add(f+".specDefinition.podSpecPath", s.PodSpecPath, false)
			add(f+".specDefinition.metadataPath", s.MetadataPath, false)
			if fr := s.FragmentedPodSpecDefinition; fr != nil {
				v := reflect.ValueOf(fr).Elem()
				for j := range v.NumField() {
					add(f+".specDefinition.fragmentedPodSpecDefinition."+v.Type().Field(j).Name, v.Field(j).Interface().(*string), false)
				}
			}
		}
		if s := c.ScaleDefinition; s != nil {
			add(f+".scaleDefinition.replicasPath", s.ReplicasPath, false)
			add(f+".scaleDefinition.minReplicasPath", s.MinReplicasPath, false)
			add(f+".scaleDefinition.maxReplicasPath", s.MaxReplicasPath, false)
		}
		if s := c.StatusDefinition; s != nil {
			if s.PhaseDefinition != nil {
				add(f+".statusDefinition.phaseDefinition.path", &s.PhaseDefinition.Path, false)
			}
			if s.ConditionsDefinition != nil {
				add(f+".statusDefinition.conditionsDefinition.path", &s.ConditionsDefinition.Path, false)
			}
			v := reflect.ValueOf(s.StatusMappings)
			for j := range v.NumField() {
				for m, sm := range v.Field(j).Interface().([]kartav1alpha1.StatusMatcher) {
					if sm.ByExpression != nil {
						add(fmt.Sprintf("%s.statusDefinition.statusMappings.%s[%d]", f, v.Type().Field(j).Name, m), &sm.ByExpression.Expression, false)
					}
				}
			}
		}
		if s := c.SuspendDefinition; s != nil {
			for j := range s.SuspendActions {
				add(fmt.Sprintf("%s.suspendDefinition.suspendActions[%d]", f, j), &s.SuspendActions[j].Path, false)
			}
			for j := range s.ResumeActions {
				add(fmt.Sprintf("%s.suspendDefinition.resumeActions[%d]", f, j), &s.ResumeActions[j].Path, false)
			}
		}
		if s := c.PodSelector; s != nil {
			if s.ComponentTypeSelector != nil {
				add(f+".podSelector.componentTypeSelector.keyPath", &s.ComponentTypeSelector.KeyPath, true)
			}
			if s.ComponentInstanceSelector != nil {
				add(f+".podSelector.componentInstanceSelector.idPath", &s.ComponentInstanceSelector.IDPath, true)
			}
			if s.ReplicaSelector != nil {
				add(f+".podSelector.replicaSelector.keyPath", &s.ReplicaSelector.KeyPath, true)
			}
		}
	}
	if oi := k.Spec.OptimizationInstructions; oi != nil && oi.GangScheduling != nil {
		for g, pg := range oi.GangScheduling.PodGroups {
			for m, mem := range pg.Members {
				for j := range mem.GroupByKeyPaths {
					add(fmt.Sprintf("podGroups[%d].members[%d].groupByKeyPaths[%d]", g, m, j), &mem.GroupByKeyPaths[j], true)
				}
				for j := range mem.Filters {
					add(fmt.Sprintf("podGroups[%d].members[%d].filters[%d]", g, m, j), &mem.Filters[j], true)
				}
			}
		}
	}
	return out
}

func loadCRDs(t *testing.T, corpus string) map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(corpus, "*", "crd"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && strings.HasSuffix(path, ".yaml") {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	out := map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		for _, crd := range crdsInFile(t, f) {
			out[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd
		}
	}
	return out
}

// crdsInFile decodes the CRDs of a YAML file, skipping other documents.
func crdsInFile(t *testing.T, file string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range readDocs(t, file) {
		data, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			out = append(out, crd)
		}
	}
	return out
}
