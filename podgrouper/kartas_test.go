package podgrouper

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/klog/v2/ktesting"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

func kartaObject(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kartav1alpha1.APIVersion, "kind": kartav1alpha1.Kind,
		"metadata": map[string]any{"name": name, "generation": int64(1), "uid": "uid-" + name},
		"spec":     spec,
	}}
	return u
}

func validSpec(kind string) map[string]any {
	return map[string]any{"structureDefinition": map[string]any{"rootComponent": map[string]any{
		"name": "root", "kind": map[string]any{"group": "acme.example.com", "version": "v1", "kind": kind},
	}}}
}

func validCondition(t *testing.T, u *unstructured.Unstructured) *metav1.Condition {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var conds []metav1.Condition
	data, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &conds); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(conds, ConditionValid)
}

// TestKartas: each Karta gets its Valid condition; one that does not decode
// and one that does not compile are reported with their field paths and
// the valid one still reaches the registry; a status-only change does not
// recompile or requeue.
func TestKartas(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)

	good := kartaObject("good", validSpec("Good"))
	unknownField := kartaObject("typo", map[string]any{"structureDefinitionTypo": map[string]any{}})
	invalid := kartaObject("invalid", validSpec("Invalid"))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{KartaResource: "KartaList"}, good, unknownField, invalid)

	defs := &fakeDefs{result: []Entry{
		{Name: "good"},
		{Name: "invalid", Err: &definition.ValidationError{Definition: "invalid", Errs: []error{
			field.Invalid(field.NewPath("spec", "structureDefinition", "rootComponent", "scaleDefinition", "replicasPath"), ".x |= 1", "assignment is not allowed"),
		}}},
	}}
	changes := 0
	m := testMapper().(*meta.DefaultRESTMapper)
	m.Add(schema.GroupVersionKind{Group: kartav1alpha1.Group, Version: kartav1alpha1.Version, Kind: kartav1alpha1.Kind}, meta.RESTScopeRoot)
	k := newKartas(dyn, m, defs, func() { changes++ })
	// Informers stop with ctx; shutdown waits for them.
	defer func() { cancel(); k.shutdown() }()
	if err := k.start(ctx); err != nil {
		t.Fatal(err)
	}

	var conds map[string]*metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		conds = map[string]*metav1.Condition{}
		for _, n := range []string{"good", "typo", "invalid"} {
			u, err := dyn.Resource(KartaResource).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds[n] = validCondition(t, u)
			if conds[n] == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("conditions not written: %v (%v)", err, conds)
	}
	if c := conds["good"]; c.Status != metav1.ConditionTrue || c.Reason != ReasonCompiled || c.ObservedGeneration != 1 {
		t.Errorf("good: %+v, want True/Compiled at generation 1", c)
	}
	if c := conds["typo"]; c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalid || !strings.Contains(c.Message, "structureDefinitionTypo") {
		t.Errorf("typo: %+v, want False/Invalid naming the unknown field", c)
	}
	if c := conds["invalid"]; c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "spec.structureDefinition.rootComponent.scaleDefinition.replicasPath") {
		t.Errorf("invalid: %+v, want False/Invalid with the field path", c)
	}
	defs.mu.Lock()
	var names []string
	for _, kt := range defs.cluster {
		names = append(names, kt.Name)
	}
	defs.mu.Unlock()
	if strings.Join(names, ",") != "good,invalid" {
		t.Errorf("registry got %v, want the two that decode (good, invalid)", names)
	}
	if changes != 1 {
		t.Errorf("definition changes = %d, want 1", changes)
	}
	// A second apply with nothing new, once the cache holds the statuses:
	// no recompile, no requeue, no write.
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, o := range k.informer.GetStore().List() {
			if validCondition(t, o.(*unstructured.Unstructured)) == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("informer did not see the statuses: %v", err)
	}
	gen := defs.Generation()
	dyn.ClearActions()
	if err := k.apply(ctx); err != nil {
		t.Fatal(err)
	}
	if defs.Generation() != gen || changes != 1 {
		t.Errorf("unchanged Kartas recompiled (generation %d → %d) or requeued (%d)", gen, defs.Generation(), changes)
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("unchanged status written: %v", a)
		}
	}
}

func TestStatusMessage(t *testing.T) {
	var errs []error
	for i := range 7 {
		errs = append(errs, field.Required(field.NewPath("spec").Index(i), "x"))
	}
	got := statusMessage(&definition.ValidationError{Definition: "d", Errs: errs})
	if !strings.Contains(got, "spec[0]: Required value") || !strings.Contains(got, "and 2 more") || strings.Contains(got, "spec[5]") {
		t.Errorf("statusMessage = %q, want the first 5 errors and a count of the rest", got)
	}
	if got := statusMessage(errors.New("plain")); got != "plain" {
		t.Errorf("statusMessage(plain) = %q", got)
	}
}
