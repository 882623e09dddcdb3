package definition

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/muster-io/muster/api"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// wholeLWS is the leader/worker definition with one gang for the whole
// workload instead of one per group.
var wholeLWS = strings.ReplaceAll(lwsDef, `              groupByKeyPaths: ['.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"]']`+"\n", "")

// gangSummary keeps what the tests compare; resource quantities compare by
// value (cmp on Quantity would compare its cached string form).
type gangSummary struct {
	Definition        string
	Keys              []string
	MinMember         int32
	Resources         map[string]int64 // milli-units
	Members           []string
	TopologyRequired  string
	TopologyPreferred string
	Overridden        bool
}

func milli(l corev1.ResourceList) map[string]int64 {
	out := map[string]int64{}
	for k, q := range l {
		out[string(k)] = q.MilliValue()
	}
	return out
}

func summarize(g *Gang) *gangSummary {
	if g == nil {
		return nil
	}
	return &gangSummary{g.Definition, g.Keys, g.MinMember, milli(g.MinResources), g.Members, g.TopologyRequired, g.TopologyPreferred, g.Overridden}
}

// Pods of the fixtures' workloads, as their operators label them.
var (
	lwsLeaderT = podT("vllm-1", "leaderworkerset.sigs.k8s.io/worker-index=0", "leaderworkerset.sigs.k8s.io/group-index=1")
	lwsWorkerT = podT("vllm-1-2", "leaderworkerset.sigs.k8s.io/worker-index=2", "leaderworkerset.sigs.k8s.io/group-index=1")
	jsWorkerT  = podT("train-workers-0-1", "jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=workers", "jobset.sigs.k8s.io/job-index=0")
	rayWorkerT = podT("rc-gpu-1", "ray.io/node-type=worker", "ray.io/group=gpu")
	rayHeadT   = podT("rc-head", "ray.io/node-type=head")
)

// gangCase is a pod of a workload and the gang GangForPod must find for
// it (none when want is nil), or the error.
type gangCase struct {
	name    string
	def     string
	obj     *objSpec
	pod     *corev1.Pod
	want    *gangSummary
	wantErr string
}

// checkGangForPod runs GangForPod on each case.
func checkGangForPod(t *testing.T, tests []gangCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compileT(t, tc.def)
			root := withAnnotations(objT(t, tc.obj.y), tc.obj.ann...)
			g, err := c.GangForPod(ctxT, root, tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("GangForPod: %v", err)
			}
			if diff := cmp.Diff(tc.want, summarize(g)); diff != "" {
				t.Errorf("gang (-want, +got):\n%s", diff)
			}
		})
	}
}

// TestGangForPod: the gang of a pod as the definition says, per kind of
// workload.
func TestGangForPod(t *testing.T) {
	checkGangForPod(t, []gangCase{
		{
			name: "leader/worker per group counts one group",
			def:  lwsDef, obj: &objSpec{y: lwsObj}, pod: lwsWorkerT,
			want: &gangSummary{Definition: "group", Keys: []string{"1"}, MinMember: 4,
				Resources: map[string]int64{"nvidia.com/gpu": 32000}, Members: []string{"leader", "worker"}},
		},
		{
			name: "leader/worker leader is in the same gang instance",
			def:  lwsDef, obj: &objSpec{y: lwsObj}, pod: lwsLeaderT,
			want: &gangSummary{Definition: "group", Keys: []string{"1"}, MinMember: 4,
				Resources: map[string]int64{"nvidia.com/gpu": 32000}, Members: []string{"leader", "worker"}},
		},
		{
			name: "leader/worker whole workload counts every group",
			def:  wholeLWS, obj: &objSpec{y: lwsObj}, pod: lwsWorkerT,
			want: &gangSummary{Definition: "group", MinMember: 8,
				Resources: map[string]int64{"nvidia.com/gpu": 64000}, Members: []string{"leader", "worker"}},
		},
		{
			name: "replicated jobs: one gang, replicas × parallelism, limits stand in for requests",
			def:  jobsetDef, obj: &objSpec{y: jobsetObj}, pod: jsWorkerT,
			want: &gangSummary{Definition: "jobset", MinMember: 3,
				Resources: map[string]int64{"nvidia.com/gpu": 12000, "cpu": 4000, "memory": 2 * 1024 * 1024 * 1024 * 1000}, Members: []string{"replicatedjob"}},
		},
		{
			name: "head and worker groups: numOfHosts and minReplicas, topology",
			def:  rayDef, obj: &objSpec{y: rayObj}, pod: rayWorkerT,
			want: &gangSummary{Definition: "raycluster", MinMember: 3,
				Resources: map[string]int64{"nvidia.com/gpu": 2000, "cpu": 2000}, Members: []string{"head", "workers"},
				TopologyRequired: "topology.kubernetes.io/zone"},
		},
		{
			name: "head pod is in the same gang",
			def:  rayDef, obj: &objSpec{y: rayObj}, pod: rayHeadT,
			want: &gangSummary{Definition: "raycluster", MinMember: 3,
				Resources: map[string]int64{"nvidia.com/gpu": 2000, "cpu": 2000}, Members: []string{"head", "workers"},
				TopologyRequired: "topology.kubernetes.io/zone"},
		},
		{
			name: "definition without gang instruction",
			def:  strings.Split(jobsetDef, "  optimizationInstructions:")[0], obj: &objSpec{y: jobsetObj}, pod: jsWorkerT,
		},
		{
			name: "pod with a missing group key names the path",
			def:  lwsDef, obj: &objSpec{y: lwsObj}, pod: podT("x", "leaderworkerset.sigs.k8s.io/worker-index=2"),
			wantErr: `groupByKeyPaths[0]`,
		},
		{
			name: "pod of an instance the workload does not have",
			def:  jobsetDef, obj: &objSpec{y: jobsetObj},
			pod:  podT("p", "jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=gone"),
			want: &gangSummary{Definition: "jobset", MinMember: 3, Resources: map[string]int64{"nvidia.com/gpu": 12000, "cpu": 4000, "memory": 2 * 1024 * 1024 * 1024 * 1000}, Members: []string{"replicatedjob"}},
		},
	})
}

// TestGangForPodAnnotations: the workload annotations that override the
// definition, and their invalid values.
func TestGangForPodAnnotations(t *testing.T) {
	checkGangForPod(t, []gangCase{
		{
			name: "min-member override below the definition scales resources down",
			def:  jobsetDef, obj: &objSpec{y: jobsetObj, ann: []string{api.AnnotationMinMember, "1"}}, pod: jsWorkerT,
			want: &gangSummary{Definition: "jobset", MinMember: 1,
				Resources: map[string]int64{"nvidia.com/gpu": 4000, "cpu": 1334, "memory": 715827883 * 1000}, Members: []string{"replicatedjob"}, Overridden: true},
		},
		{
			name: "min-member override above keeps the definition's resources",
			def:  lwsDef, obj: &objSpec{y: lwsObj, ann: []string{api.AnnotationMinMember, "6"}}, pod: lwsWorkerT,
			want: &gangSummary{Definition: "group", Keys: []string{"1"}, MinMember: 6,
				Resources: map[string]int64{"nvidia.com/gpu": 32000}, Members: []string{"leader", "worker"}, Overridden: true},
		},
		{
			name: "topology annotations replace the definition's",
			def:  rayDef, obj: &objSpec{y: rayObj, ann: []string{api.AnnotationTopologyRequired, "rack", api.AnnotationTopologyPreferred, "example.com/block"}}, pod: rayHeadT,
			want: &gangSummary{Definition: "raycluster", MinMember: 3,
				Resources: map[string]int64{"nvidia.com/gpu": 2000, "cpu": 2000}, Members: []string{"head", "workers"},
				TopologyRequired: "rack", TopologyPreferred: "example.com/block"},
		},
		{
			name: "opted-out workload has no gang",
			def:  jobsetDef, obj: &objSpec{y: jobsetObj, ann: []string{api.AnnotationGang, api.GangOff}}, pod: jsWorkerT,
		},
		{
			name: "bad min-member annotation names it",
			def:  jobsetDef, obj: &objSpec{y: jobsetObj, ann: []string{api.AnnotationMinMember, "zero"}}, pod: jsWorkerT,
			wantErr: `workload annotation muster.io/min-member: "zero": must be a whole number from 1 to 100000`,
		},
		{
			name: "negative min-member annotation",
			def:  jobsetDef, obj: &objSpec{y: jobsetObj, ann: []string{api.AnnotationMinMember, "-2"}}, pod: jsWorkerT,
			wantErr: `must be a whole number from 1 to 100000`,
		},
		{
			name: "unknown gang annotation value",
			def:  jobsetDef, obj: &objSpec{y: jobsetObj, ann: []string{api.AnnotationGang, "no"}}, pod: jsWorkerT,
			wantErr: `workload annotation muster.io/gang: "no"`,
		},
	})
}

type objSpec struct {
	y   string
	ann []string
}

func TestGangForPodNoComponent(t *testing.T) {
	c := compileT(t, jobsetDef)
	_, err := c.GangForPod(ctxT, objT(t, jobsetObj), podT("stray", "app=x"))
	if !errors.Is(err, ErrNoComponent) {
		t.Fatalf("error = %v, want ErrNoComponent", err)
	}
}

// A grouped gang whose scope is below the root: each "cell" instance has
// replicas (totals: copies × the cell's replicas), a gang instance is one
// replica of one cell, and the cell's members' totals are divided among its
// replicas; other cells do not count.
func TestGangScopeBelowRoot(t *testing.T) {
	def := `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: cells}
spec:
  structureDefinition:
    rootComponent:
      name: app
      kind: {group: example.com, version: v1, kind: App}
      scaleDefinition: {replicasPath: .spec.copies}
    childComponents:
      - name: cell
        ownerRef: app
        instanceIdPath: .spec.cells[].name
        scaleDefinition: {replicasPath: '.spec.cells[].replicas * .spec.copies'}
      - name: head
        ownerRef: cell
        instanceIdPath: .spec.cells[].name
        specDefinition: {podTemplateSpecPath: .spec.template}
        scaleDefinition: {replicasPath: '.spec.cells[].replicas * .spec.copies'}
        podSelector:
          componentTypeSelector: {keyPath: .metadata.labels.role, value: head}
          componentInstanceSelector: {idPath: .metadata.labels.cell}
      - name: member
        ownerRef: cell
        instanceIdPath: .spec.cells[].name
        specDefinition: {podTemplateSpecPath: .spec.template}
        scaleDefinition: {replicasPath: '(.spec.cells[] | .replicas * .size) * .spec.copies'}
        podSelector:
          componentTypeSelector: {keyPath: .metadata.labels.role, value: member}
          componentInstanceSelector: {idPath: .metadata.labels.cell}
  optimizationInstructions:
    gangScheduling:
      podGroups:
        - name: cell
          members:
            - {componentName: head, groupByKeyPaths: [.metadata.labels.cell, .metadata.labels.replica]}
            - {componentName: member, groupByKeyPaths: [.metadata.labels.cell, .metadata.labels.replica]}
`
	obj := `
apiVersion: example.com/v1
kind: App
metadata: {name: a}
spec:
  copies: 2
  template: {spec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}}
  cells:
    - {name: small, replicas: 3, size: 2}
    - {name: big, replicas: 1, size: 5}
`
	c := compileT(t, def)
	root := objT(t, obj)
	for _, tc := range []struct {
		cell string
		want int32
	}{{"small", 3}, {"big", 6}} {
		g, err := c.GangForPod(ctxT, root, podT("p", "role=member", "cell="+tc.cell, "replica=0"))
		if err != nil {
			t.Fatal(err)
		}
		if g.MinMember != tc.want || strings.Join(g.Keys, ",") != tc.cell+",0" {
			t.Errorf("cell %s: MinMember %d keys %v, want %d [%s 0]", tc.cell, g.MinMember, g.Keys, tc.want, tc.cell)
		}
	}
	plans, err := c.GangPlans(ctxT, root)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, p := range plans {
		got = append(got, p.Definition+":"+itoa(p.Instances)+"x"+itoa(int(p.MinMember)))
	}
	// small: 3 replicas × 2 copies = 6 gang instances of 3 pods; big: 2 of 6.
	if diff := cmp.Diff([]string{"cell:6x3", "cell:2x6"}, got); diff != "" {
		t.Errorf("plans (-want, +got):\n%s", diff)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestGangPlans(t *testing.T) {
	tests := []struct {
		name, def string
		obj       *objSpec
		want      []string // definition:instances x minMember gpus
	}{
		{"per group", lwsDef, &objSpec{y: lwsObj}, []string{"group:2x4 gpu=32"}},
		{"whole workload", wholeLWS, &objSpec{y: lwsObj}, []string{"group:1x8 gpu=64"}},
		{"replicated jobs", jobsetDef, &objSpec{y: jobsetObj}, []string{"jobset:1x3 gpu=12"}},
		{"override", jobsetDef, &objSpec{y: jobsetObj, ann: []string{api.AnnotationMinMember, "2"}}, []string{"jobset:1x2 gpu=8"}},
		{"opted out", jobsetDef, &objSpec{y: jobsetObj, ann: []string{api.AnnotationGang, api.GangOff}}, nil},
		{"head and workers", rayDef, &objSpec{y: rayObj}, []string{"raycluster:1x3 gpu=2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compileT(t, tc.def)
			plans, err := c.GangPlans(ctxT, withAnnotations(objT(t, tc.obj.y), tc.obj.ann...))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range plans {
				got = append(got, p.Definition+":"+itoa(p.Instances)+"x"+itoa(int(p.MinMember))+" gpu="+
					strings.TrimLeft(resource.NewQuantity(GPUs(p.MinResources, DefaultGPUResourceNames), resource.DecimalSI).String(), " "))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plans (-want, +got):\n%s", diff)
			}
		})
	}
}

// The cache must not serve a plan of an older version of the object.
func TestGangForPodCacheFollowsResourceVersion(t *testing.T) {
	c := compileT(t, jobsetDef)
	root := objT(t, jobsetObj)
	pod := podT("p", "jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=workers")
	g, err := c.GangForPod(ctxT, root, pod)
	if err != nil || g.MinMember != 3 {
		t.Fatalf("first: %v %v", g, err)
	}
	root2 := root.DeepCopy()
	jobs, _, _ := unstructuredSlice(root2.Object, "spec", "replicatedJobs")
	jobs[1].(map[string]any)["replicas"] = int64(3)
	root2.SetResourceVersion("8")
	g, err = c.GangForPod(ctxT, root2, pod)
	if err != nil || g.MinMember != 7 {
		t.Fatalf("after update: MinMember %v, err %v; want 7", g.MinMember, err)
	}
}

func unstructuredSlice(m map[string]any, path ...string) ([]any, bool, error) {
	var cur any = m
	for _, p := range path {
		cur = cur.(map[string]any)[p]
	}
	a, ok := cur.([]any)
	return a, ok, nil
}

// A definition without any gang instruction: muster.io/min-member on the
// workload still makes its pods one gang (the override works for every
// kind), and nothing changes without the annotation.
func TestMinMemberOverrideOnKindWithoutGangs(t *testing.T) {
	const def = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: deployment}
spec:
  structureDefinition:
    rootComponent:
      name: deployment
      kind: {group: apps, version: v1, kind: Deployment}
      specDefinition: {podTemplateSpecPath: .spec.template}
      scaleDefinition: {replicasPath: .spec.replicas}
`
	obj := func(ann string) string {
		return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns` + ann + `}
spec:
  replicas: 4
  template:
    spec:
      containers:
      - name: c
        resources: {requests: {cpu: "1", nvidia.com/gpu: "2"}}
`
	}
	c := compileT(t, def)
	pod := podT("web-abc", "app=web")

	g, err := c.GangForPod(ctxT, objT(t, obj("")), pod)
	if err != nil || g != nil {
		t.Fatalf("without the annotation: gang %+v, err %v; want none", g, err)
	}
	if plans, err := c.GangPlans(ctxT, objT(t, obj(""))); err != nil || len(plans) != 0 {
		t.Fatalf("without the annotation: plans %+v, err %v; want none", plans, err)
	}

	withAnn := objT(t, obj(`, annotations: {muster.io/min-member: "3"}`))
	g, err = c.GangForPod(ctxT, withAnn, pod)
	if err != nil {
		t.Fatal(err)
	}
	if g == nil {
		t.Fatal("with muster.io/min-member: no gang")
	}
	gpu := g.MinResources["nvidia.com/gpu"]
	if g.Definition != "deployment" || len(g.Keys) != 0 || g.MinMember != 3 || !g.Overridden || gpu.Value() != 6 {
		t.Errorf("gang = %+v (gpu %s); want whole-workload gang \"deployment\", MinMember 3, 6 GPUs, Overridden", g, gpu.String())
	}
	plans, err := c.GangPlans(ctxT, withAnn)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Instances != 1 || plans[0].MinMember != 3 {
		t.Errorf("plans = %+v; want one plan of one instance with MinMember 3", plans)
	}

	off := objT(t, obj(`, annotations: {muster.io/min-member: "3", muster.io/gang: "off"}`))
	if g, err := c.GangForPod(ctxT, off, pod); err != nil || g != nil {
		t.Errorf("opted out: gang %+v, err %v; want none", g, err)
	}
}
