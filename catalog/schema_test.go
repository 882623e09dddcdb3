package catalog

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition/jq/schemacheck"
)

// podSchema is what pod-side paths (pod selectors, gang keys and filters)
// run on.
var podSchema = schemacheck.FromGoType(reflect.TypeFor[corev1.Pod]())

// schemaProblems checks every path of k against root (the schema of the
// root kind) or, for pod-side paths, against the Pod, with the same checker
// "muster validate --crd" uses, and describes each field that cannot exist.
func schemaProblems(k *kartav1alpha1.Karta, root *apiextensionsv1.JSONSchemaProps) []string {
	rootKind := k.Spec.StructureDefinition.RootComponent.Kind.Kind
	var out []string
	for _, p := range definitionPaths(k) {
		target, what := root, rootKind
		if p.onPod {
			target, what = podSchema, "Pod"
		}
		problems, err := schemacheck.Check(p.expr, target)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", p.field, err))
			continue
		}
		for _, pr := range problems {
			out = append(out, fmt.Sprintf("%s: %s reads %s, which the %s schema does not have: %s", p.field, strings.TrimSpace(p.expr), pr.Path, what, pr.Message))
		}
	}
	return out
}

// TestSchemaProblemsCatchesTypos is the negative test of
// TestDefinitionPathsInSchema, without the corpus: an embedded definition
// with one field misspelled, on the root object and on the pod, must be
// reported, and the definition as shipped must not.
func TestSchemaProblemsCatchesTypos(t *testing.T) {
	deploy := embeddedKarta(t, "deployment")
	deploySchema := schemacheck.FromGoType(reflect.TypeFor[appsv1.Deployment]())
	if got := schemaProblems(deploy, deploySchema); len(got) > 0 {
		t.Errorf("the shipped deployment definition has problems: %v", got)
	}

	// A misspelled field of the Deployment.
	bad := embeddedKarta(t, "deployment")
	typo := ".spec.replicaz // 1"
	bad.Spec.StructureDefinition.RootComponent.ScaleDefinition.ReplicasPath = &typo
	got := schemaProblems(bad, deploySchema)
	if len(got) != 1 || !strings.Contains(got[0], ".spec.replicaz") || !strings.Contains(got[0], `did you mean "replicas"`) {
		t.Errorf("misspelled replicasPath: got %v, want one problem naming .spec.replicaz", got)
	}

	// A misspelled field of the pod, in a pod selector (LWS has them).
	bad = embeddedKarta(t, "leaderworkerset")
	found := false
	for i := range bad.Spec.StructureDefinition.ChildComponents {
		ps := bad.Spec.StructureDefinition.ChildComponents[i].PodSelector
		if ps != nil && ps.ComponentTypeSelector != nil && strings.Contains(ps.ComponentTypeSelector.KeyPath, ".metadata.labels") {
			ps.ComponentTypeSelector.KeyPath = strings.Replace(ps.ComponentTypeSelector.KeyPath, ".metadata.labels", ".metadata.lables", 1)
			found = true
			break
		}
	}
	if !found {
		t.Fatal("no leaderworkerset pod selector reads .metadata.labels")
	}
	got = schemaProblems(bad, nil) // a nil root schema accepts every root path
	if len(got) != 1 || !strings.Contains(got[0], ".metadata.lables") || !strings.Contains(got[0], "Pod schema") {
		t.Errorf("misspelled pod label path: got %v, want one problem naming .metadata.lables on the Pod", got)
	}
}
