package definition

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// refDef is a trainer-like definition whose node count defaults to the
// runtime's, which is namespaced or cluster-scoped as the root says.
const refDefYAML = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata:
  name: tj
  annotations:
    muster.io/references: |
      - name: rt
        namePath: .spec.runtimeRef.name
        kindPath: .spec.runtimeRef.kind // "ClusterRuntime"
        kinds:
        - {group: ex.io, version: v1, kind: ClusterRuntime, scope: Cluster}
        - {group: ex.io, version: v1, kind: Runtime}
spec:
  structureDefinition:
    rootComponent:
      name: tj
      kind: {group: ex.io, version: v1, kind: TJ}
      statusDefinition:
        statusMappings:
          running:
          - byExpression: {expression: '$rt != null', expectedResult: "true"}
    childComponents:
    - name: node
      ownerRef: tj
      specDefinition:
        podTemplateSpecPath: .spec.template // $rt.spec.template
      scaleDefinition:
        replicasPath: .spec.numNodes // $rt.spec.numNodes // 1
      podSelector:
        componentTypeSelector: {keyPath: '.metadata.labels.role', value: node}
  optimizationInstructions:
    gangScheduling:
      podGroups:
      - name: nodes
        members: [{componentName: node}]
`

const refRootYAML = `
apiVersion: ex.io/v1
kind: TJ
metadata: {name: a, namespace: ns, uid: u1, resourceVersion: "1"}
spec:
  runtimeRef: {name: torch}
`

const refRuntimeYAML = `
apiVersion: ex.io/v1
kind: ClusterRuntime
metadata: {name: torch, uid: r1, resourceVersion: "7"}
spec:
  numNodes: 4
  template:
    spec:
      containers: [{name: main, image: x, resources: {limits: {nvidia.com/gpu: "2"}}}]
`

func TestReferenceTargets(t *testing.T) {
	c := compileT(t, refDefYAML)
	for _, tc := range []struct {
		name, spec string
		want       []Target
		wantErr    string
	}{
		{"default kind is cluster-scoped", `{runtimeRef: {name: torch}}`,
			[]Target{{Reference: "rt", Kind: ReferenceKind{Group: "ex.io", Version: "v1", Kind: "ClusterRuntime", Scope: ScopeCluster}, Name: "torch"}}, ""},
		{"namespaced kind in the root's namespace", `{runtimeRef: {name: mine, kind: Runtime}}`,
			[]Target{{Reference: "rt", Kind: ReferenceKind{Group: "ex.io", Version: "v1", Kind: "Runtime"}, Namespace: "ns", Name: "mine"}}, ""},
		{"no name names nothing", `{runtimeRef: {kind: Runtime}}`, nil, ""},
		{"no ref at all", `{}`, nil, ""},
		{"unlisted kind", `{runtimeRef: {name: x, kind: Secret}}`, nil, `kindPath ".spec.runtimeRef.kind // \"ClusterRuntime\"": names kind "Secret"; reference "rt" allows ClusterRuntime, Runtime`},
		{"name not a string", `{runtimeRef: {name: [1]}}`, nil, `namePath ".spec.runtimeRef.name": yields a array, want a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := objT(t, "apiVersion: ex.io/v1\nkind: TJ\nmetadata: {name: a, namespace: ns}\nspec: "+tc.spec)
			got, err := c.Targets(ctxT, root)
			if tc.wantErr != "" {
				var ee *EvalError
				if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "metadata.annotations[muster.io/references][0]") {
					t.Fatalf("err = %v, want an EvalError naming the field with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReferenceBinding(t *testing.T) {
	c := compileT(t, refDefYAML)
	root := objT(t, refRootYAML)
	rt := objT(t, refRuntimeYAML)
	pod := podT("a-node-0", "role=node")

	bound := WithReferences(ctxT, Bindings{Objects: map[string]*unstructured.Unstructured{"rt": rt}})
	missing := WithReferences(ctxT, Bindings{Objects: map[string]*unstructured.Unstructured{"rt": nil}})
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		min      int32
		gpus     int64
		running  bool
		numNodes any // set on the root when not nil
	}{
		{name: "runtime gives the count and the template", ctx: bound, min: 4, gpus: 8000, running: true},
		{name: "the root's own count wins", ctx: bound, min: 2, gpus: 4000, running: true, numNodes: int64(2)},
		{name: "missing runtime is null: no template, no pods", ctx: missing, min: 0},
		{name: "unbound is null", ctx: ctxT, min: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := root.DeepCopy()
			if tc.numNodes != nil {
				if err := unstructured.SetNestedField(r.Object, tc.numNodes, "spec", "numNodes"); err != nil {
					t.Fatal(err)
				}
				r.SetResourceVersion("2")
			}
			ctx := tc.ctx
			g, err := c.GangForPod(ctx, r, pod)
			if err != nil {
				t.Fatal(err)
			}
			if g.MinMember != tc.min || milli(g.MinResources)["nvidia.com/gpu"] != tc.gpus {
				t.Errorf("gang = %+v, want min-member %d and %d milli-GPUs", summarize(g), tc.min, tc.gpus)
			}
			st, err := c.Status(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Primary() == "Running"; got != tc.running {
				t.Errorf("status %v, want running %v", st.Statuses, tc.running)
			}
		})
	}

	// The plan cache keys on the bound objects too: a changed runtime with
	// the same root gives the new count.
	rt2 := rt.DeepCopy()
	if err := unstructured.SetNestedField(rt2.Object, int64(6), "spec", "numNodes"); err != nil {
		t.Fatal(err)
	}
	rt2.SetResourceVersion("8")
	plans, err := c.GangPlans(WithReferences(ctxT, Bindings{Objects: map[string]*unstructured.Unstructured{"rt": rt2}}), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].MinMember != 6 {
		t.Errorf("plans after the runtime changed = %+v, want min-member 6", plans)
	}
}

// TestNoReferencesUnchanged: a definition without references compiles its
// expressions without variables, and binding objects changes nothing.
func TestNoReferencesUnchanged(t *testing.T) {
	c := compileT(t, lwsDef)
	if c.HasReferences() {
		t.Fatal("lws definition has references")
	}
	for _, comp := range c.comps {
		for _, e := range []*expr{comp.replicas, comp.spec.podTemplateSpec} {
			if e != nil && e.code.ReadsVars() {
				t.Errorf("%s reads references", e.field)
			}
		}
	}
}

func TestReferenceValidation(t *testing.T) {
	withRefs := func(refs, replicas, keyPath string) string {
		s := strings.Replace(refDefYAML, `      - name: rt
        namePath: .spec.runtimeRef.name
        kindPath: .spec.runtimeRef.kind // "ClusterRuntime"
        kinds:
        - {group: ex.io, version: v1, kind: ClusterRuntime, scope: Cluster}
        - {group: ex.io, version: v1, kind: Runtime}
`, refs, 1)
		if replicas != "" {
			s = strings.Replace(s, `replicasPath: .spec.numNodes // $rt.spec.numNodes // 1`, "replicasPath: "+replicas, 1)
		}
		if keyPath != "" {
			s = strings.Replace(s, `keyPath: '.metadata.labels.role'`, "keyPath: "+keyPath, 1)
		}
		return s
	}
	one := "      - {name: rt, namePath: .spec.r, kinds: [{version: v1, kind: R}]}\n"
	for _, tc := range []struct {
		name, def, want string
	}{
		{"not a list", withRefs("      name: rt\n", "", ""), `metadata.annotations[muster.io/references]: Invalid value: "name: rt\n": want a YAML or JSON list`},
		{"unknown field", withRefs("      - {name: rt, namePath: .spec.r, kind: R, kinds: [{version: v1, kind: R}]}\n", "", ""), `unknown field "kind"`},
		{"bad name", withRefs(strings.Replace(one, "name: rt", "name: $rt", 1), "", ""), `[0].name: Invalid value: "$rt": a reference name is a jq variable name`},
		{"reserved name", withRefs(strings.Replace(one, "name: rt", "name: ENV", 1), "", ""), `$ENV is jq's environment`},
		{"duplicate", withRefs(one+one, "", ""), `[1].name: Duplicate value: "rt"`},
		{"no name path", withRefs("      - {name: rt, kinds: [{version: v1, kind: R}]}\n", "", ""), `[0].namePath: Required value`},
		{"no kinds", withRefs("      - {name: rt, namePath: .spec.r}\n", "", ""), `[0].kinds: Required value`},
		{"several kinds without kindPath", withRefs("      - {name: rt, namePath: .spec.r, kinds: [{version: v1, kind: R}, {version: v1, kind: S}]}\n", "", ""), `[0].kindPath: Required value: with several kinds`},
		{"bad scope", withRefs("      - {name: rt, namePath: .spec.r, kinds: [{version: v1, kind: R, scope: Global}]}\n", "", ""), `[0].kinds[0].scope: Unsupported value: "Global"`},
		{"kind twice", withRefs("      - {name: rt, namePath: .spec.r, kindPath: .k, kinds: [{version: v1, kind: R}, {version: v2, kind: R}]}\n", "", ""), `[0].kinds[1].kind: Duplicate value: "R"`},
		{"name path reads a reference", withRefs("      - {name: rt, namePath: $rt.x, kinds: [{version: v1, kind: R}]}\n", "", ""), `[0].namePath: Invalid value: "$rt.x": jq expression does not compile: variable not defined: $rt`},
		{"too many", withRefs(strings.Repeat("      - {name: rt, namePath: .spec.r, kinds: [{version: v1, kind: R}]}\n", MaxReferences+1), "", ""), `Too many: 9: must have at most 8 items`},
		{"undeclared variable", withRefs(one, ".spec.n // $other.n", ""), `replicasPath: Invalid value: ".spec.n // $other.n": jq expression does not compile: variable not defined: $other; a definition reads another object through a reference declared in the annotation muster.io/references`},
		{"pod side cannot read it", withRefs(one, "", `'$rt.role'`), `keyPath: Invalid value: "$rt.role": jq expression does not compile: variable not defined: $rt`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(decodeT(t, tc.def), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestUnresolvedReference: an unresolved reference fails exactly the
// evaluations that read it, even through // and try, and the plan cache
// does not hand out the answer of another binding.
func TestUnresolvedReference(t *testing.T) {
	c := compileT(t, refDefYAML)
	root := objT(t, refRootYAML)
	pod := podT("a-node-0", "role=node")
	unresolved := WithReferences(ctxT, Bindings{Unresolved: map[string]string{"rt": "ClusterRuntime torch does not exist"}})

	_, err := c.GangForPod(unresolved, root, pod)
	var ue *UnresolvedError
	if !errors.As(err, &ue) || ue.Reference != "rt" || !strings.Contains(err.Error(), `reads $rt, which is not resolved: ClusterRuntime torch does not exist`) {
		t.Fatalf("GangForPod with the runtime unresolved: err = %v, want an UnresolvedError", err)
	}
	// Once the object is there, the same root is computed afresh.
	rt := objT(t, refRuntimeYAML)
	g, err := c.GangForPod(WithReferences(ctxT, Bindings{Objects: map[string]*unstructured.Unstructured{"rt": rt}}), root, pod)
	if err != nil || g.MinMember != 4 {
		t.Fatalf("GangForPod with the runtime: %+v, %v; want min-member 4", summarize(g), err)
	}

	// A root that says everything itself never reads the reference.
	own := root.DeepCopy()
	own.SetResourceVersion("3")
	if err := unstructured.SetNestedField(own.Object, int64(3), "spec", "numNodes"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(own.Object, map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": "x"}}}}, "spec", "template"); err != nil {
		t.Fatal(err)
	}
	g, err = c.GangForPod(unresolved, own, pod)
	if err != nil || g.MinMember != 3 {
		t.Fatalf("GangForPod of a root with its own count and template: %+v, %v; want min-member 3", summarize(g), err)
	}

	for _, src := range []string{`try $rt.spec.numNodes catch 1`, `($rt | .spec.numNodes)? // 1`, `[$rt] | length`, `$rt.spec.numNodes // error("no count")`} {
		e, fe := compileJQVars(nil, src, []string{"rt"})
		if fe != nil {
			t.Fatalf("%s: %v", src, fe)
		}
		if _, err := c.eval(unresolved, e, map[string]any{}); !errors.As(err, &ue) {
			t.Errorf("%s with $rt unresolved: err = %v, want an UnresolvedError", src, err)
		}
	}
}

// TestReferenceNamesNotRebound: an expression may not bind a reference's
// name itself, and forms that are not rewritten do not compile.
func TestReferenceNamesNotRebound(t *testing.T) {
	vars := []string{"rt"}
	for _, tc := range []struct{ src, want string }{
		{`.spec as $rt | $rt.x`, "$rt is the variable of a reference"},
		{`def f($rt): $rt; f(1)`, "$rt is the variable of a reference"},
		{`.spec as {$rt} | 1`, "$rt is the variable of a reference"},
		{`reduce .[] as $rt (0; . + 1)`, "$rt is the variable of a reference"},
		{`{$rt}`, "variable not defined: $rt"},
	} {
		if _, fe := compileJQVars(nil, tc.src, vars); fe == nil || !strings.Contains(fe.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.src, fe, tc.want)
		}
	}
}
