package definition

import (
	"errors"
	"strings"
	"testing"
)

// minimal is a valid definition the cases below break one rule at a time.
const minimal = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: demo}
spec:
  structureDefinition:
    rootComponent:
      name: app
      kind: {group: example.com, version: v1, kind: App}
    childComponents:
      - name: worker
        ownerRef: app
        specDefinition: {podTemplateSpecPath: .spec.template}
        scaleDefinition: {replicasPath: .spec.replicas}
`

// TestBadInput is what a new user gets for common mistakes: one clear
// message with the field path and the reason, never a panic.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the single error
	}{
		{"broken YAML", "apiVersion: run.ai/v1alpha1\nkind: Karta\nspec: [\n", []string{"decode definition", "yaml"}},
		{"not an object", "- a\n- b\n", []string{"want an object with apiVersion run.ai/v1alpha1"}},
		{"wrong apiVersion", strings.Replace(minimal, "run.ai/v1alpha1", "run.ai/v1", 1), []string{`apiVersion: Invalid value: "run.ai/v1": must be run.ai/v1alpha1`}},
		{"wrong kind", strings.Replace(minimal, "kind: Karta", "kind: JobSet", 1), []string{`kind: Invalid value: "JobSet": must be Karta`}},
		{"unknown field typo", strings.Replace(minimal, "replicasPath", "replicaPath", 1),
			[]string{"spec.structureDefinition.childComponents[0].scaleDefinition.replicaPath", "unknown field", `did you mean "replicasPath"`}},
		{"wrong type", strings.Replace(minimal, "replicasPath: .spec.replicas", "replicasPath: 3", 1),
			[]string{"spec.structureDefinition.childComponents[0].scaleDefinition.replicasPath", "must be a string, not a number"}},
		{"list instead of object", strings.Replace(minimal, "specDefinition: {podTemplateSpecPath: .spec.template}", "specDefinition: [a]", 1),
			[]string{"spec.structureDefinition.childComponents[0].specDefinition", "must be a object, not a list"}},
		{"jq typo", strings.Replace(minimal, ".spec.replicas", ".spec.replicas | lenght", 1),
			[]string{"spec.structureDefinition.childComponents[0].scaleDefinition.replicasPath", "function not defined: lenght/0"}},
		{"jq syntax", strings.Replace(minimal, ".spec.replicas", `".spec.replicas["`, 1),
			[]string{"spec.structureDefinition.childComponents[0].scaleDefinition.replicasPath", "not a valid jq expression"}},
		{"assignment", strings.Replace(minimal, ".spec.replicas", `".spec.replicas |= 2"`, 1),
			[]string{`spec.structureDefinition.childComponents[0].scaleDefinition.replicasPath: Invalid value: ".spec.replicas |= 2": assignment (|=) is not allowed in a path; use a read-only path such as .spec.replicas`}},
		{"banned function", strings.Replace(minimal, ".spec.replicas", `"[paths] | length"`, 1),
			[]string{"replicasPath", "paths is not allowed"}},
		{"missing owner", strings.Replace(minimal, "ownerRef: app", "ownerRef: ap", 1),
			[]string{`spec.structureDefinition.childComponents[0].ownerRef: Not found: "ap"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeAndCompile(tc.yaml)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\ndoes not contain %q", msg, w)
				}
			}
			var ve *ValidationError
			if errors.As(err, &ve) && len(ve.Errs) != 1 {
				t.Errorf("got %d errors, want one: %v", len(ve.Errs), err)
			}
			if strings.Contains(msg, "goroutine") || strings.Contains(msg, ".go:") {
				t.Errorf("message looks like a stack trace: %s", msg)
			}
		})
	}
}

func decodeAndCompile(y string) error {
	k, err := Decode([]byte(y))
	if err != nil {
		return err
	}
	_, err = Compile(k, Options{})
	return err
}

// validateRoot is a definition of a root component only; cases append
// its children.
const validateRoot = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: demo}
spec:
  structureDefinition:
    rootComponent:
      name: app
      kind: {group: example.com, version: v1, kind: App}
`

// validateCase is a definition and what Validate must say about it.
type validateCase struct {
	name string
	yaml string
	want []string // each must be found in one field error
}

// checkValidate runs Validate on each case: no error when want is empty,
// else every want in the errors.
func checkValidate(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(decodeT(t, tc.yaml))
			if len(tc.want) == 0 {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				return
			}
			all := errs.ToAggregate()
			if all == nil {
				t.Fatalf("no errors, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(all.Error(), w) {
					t.Errorf("errors %q\ndo not contain %q", all.Error(), w)
				}
			}
		})
	}
}

// TestValidateComponents: the component tree: names, kinds, owners.
func TestValidateComponents(t *testing.T) {
	checkValidate(t, []validateCase{
		{"valid minimal", minimal, nil},
		{"duplicate names", validateRoot + `
    childComponents:
      - {name: app, ownerRef: app}
`, []string{`childComponents[0].name: Duplicate value: "app"`}},
		{"empty name", validateRoot + `
    childComponents:
      - {name: "", ownerRef: app}
`, []string{`childComponents[0].name: Required value`}},
		{"root without kind", strings.Replace(validateRoot, "kind: {group: example.com, version: v1, kind: App}", "kind: null", 1),
			[]string{"rootComponent.kind: Required value"}},
		{"kind without version", strings.Replace(validateRoot, "version: v1, ", "", 1), []string{"rootComponent.kind.version: Required value"}},
		{"empty group only for core", strings.Replace(validateRoot, "group: example.com, version: v1", `group: "", version: v2`, 1), []string{"rootComponent.kind.group"}},
		{"child kind checked", validateRoot + `
    childComponents:
      - {name: w, ownerRef: app, kind: {group: apps, version: v1, kind: ""}}
`, []string{"childComponents[0].kind.kind: Required value"}},
		{"root with owner", strings.Replace(validateRoot, "name: app\n", "name: app\n      ownerRef: app\n", 1), []string{"rootComponent.ownerRef: Forbidden"}},
		{"child without owner", validateRoot + `
    childComponents:
      - {name: w}
`, []string{"childComponents[0].ownerRef: Required value"}},
		{"cycle", validateRoot + `
    childComponents:
      - {name: a, ownerRef: b}
      - {name: b, ownerRef: a}
`, []string{"childComponents[0].ownerRef", "cycle"}},
		{"several problems reported together", validateRoot + `
    childComponents:
      - {name: a}
      - {name: a, ownerRef: app, scaleDefinition: {replicasPath: "del(.x)"}}
`, []string{"childComponents[0].ownerRef: Required", `childComponents[1].name: Duplicate`, "del modifies the document"}},
	})
}

// TestValidateSpecAndSelectors: spec shapes and pod selectors.
func TestValidateSpecAndSelectors(t *testing.T) {
	checkValidate(t, []validateCase{
		{"two spec shapes", validateRoot + `
    childComponents:
      - name: w
        ownerRef: app
        specDefinition: {podTemplateSpecPath: .a, podSpecPath: .b}
`, []string{"childComponents[0].specDefinition", "exactly one of"}},
		{"no spec shape", validateRoot + `
    childComponents:
      - {name: w, ownerRef: app, specDefinition: {}}
`, []string{"exactly one of"}},
		{"metadataPath alone", validateRoot + `
    childComponents:
      - name: w
        ownerRef: app
        specDefinition: {podTemplateSpecPath: .a, metadataPath: .m}
`, []string{"specDefinition.metadataPath: Forbidden"}},
		{"empty fragmented", validateRoot + `
    childComponents:
      - {name: w, ownerRef: app, specDefinition: {fragmentedPodSpecDefinition: {}}}
`, []string{"fragmentedPodSpecDefinition: Required value"}},
		{"instance selector without instanceIdPath", validateRoot + `
    childComponents:
      - name: w
        ownerRef: app
        specDefinition: {podTemplateSpecPath: .a}
        podSelector: {componentInstanceSelector: {idPath: .metadata.name}}
`, []string{"childComponents[0].instanceIdPath: Required value"}},
		{"instanceIdPath without instance selector", validateRoot + `
    childComponents:
      - name: w
        ownerRef: app
        instanceIdPath: .spec.x[].name
        specDefinition: {podTemplateSpecPath: .a}
`, []string{"childComponents[0].podSelector.componentInstanceSelector: Required value"}},
		{"empty type selector", validateRoot + `
    childComponents:
      - name: w
        ownerRef: app
        specDefinition: {podTemplateSpecPath: .a}
        podSelector: {componentTypeSelector: {}}
`, []string{"podSelector.componentTypeSelector: Required value"}},
	})
}

// TestValidateStatus: the status definition.
func TestValidateStatus(t *testing.T) {
	checkValidate(t, []validateCase{
		{"status only on root", validateRoot + `
    childComponents:
      - name: w
        ownerRef: app
        statusDefinition: {statusMappings: {}}
`, []string{"childComponents[0].statusDefinition: Forbidden"}},
		{"conditions without path", validateRoot + `
      statusDefinition:
        conditionsDefinition: {path: ""}
        statusMappings: {running: [{byConditions: [{type: Ready}]}]}
`, []string{"conditionsDefinition.path: Required value"}},
		{"empty matcher", validateRoot + `
      statusDefinition:
        statusMappings: {running: [{}]}
`, []string{"statusMappings.running[0]: Required value"}},
	})
}

// TestValidateGangs: gang definitions, older and newer form.
func TestValidateGangs(t *testing.T) {
	checkValidate(t, []validateCase{
		{"gang member unknown", minimal + `
  optimizationInstructions:
    gangScheduling:
      podGroups: [{name: g, members: [{componentName: nope}]}]
`, []string{`podGroups[0].members[0].componentName: Not found: "nope"`}},
		{"duplicate gang names", minimal + `
  optimizationInstructions:
    gangScheduling:
      podGroups:
        - {name: g, members: [{componentName: worker}]}
        - {name: g, members: [{componentName: worker}]}
`, []string{`podGroups[1].name: Duplicate value: "g"`}},
		{"both gang forms", minimal + `
  optimizationInstructions:
    gangScheduling:
      podGroups: [{name: g, members: [{componentName: worker}]}]
      podGroup: {name: h}
`, []string{"gangScheduling: Forbidden: set podGroups or podGroup, not both"}},
		{"subgroup unknown", minimal + `
  optimizationInstructions:
    gangScheduling:
      podGroup: {subGroups: [{componentName: x}]}
`, []string{`podGroup.subGroups[0].componentName: Not found: "x"`}},
		{"bad topology key", minimal + `
  optimizationInstructions:
    gangScheduling:
      podGroup: {topology: {requiredTopologyLevel: "not a key"}}
`, []string{"podGroup.topology.requiredTopologyLevel"}},
		{"banned filter", minimal + `
  optimizationInstructions:
    gangScheduling:
      podGroups: [{name: g, members: [{componentName: worker, filters: ["env.HOME != null"]}]}]
`, []string{"members[0].filters[0]", "env reaches outside the document"}},
	})
}

func TestDecodeAll(t *testing.T) {
	ks, err := DecodeAll([]byte(minimal + "\n---\n# nothing\n---\n" + jobsetDef))
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || ks[0].Name != "demo" || ks[1].Name != "jobset" {
		t.Fatalf("got %d definitions", len(ks))
	}
	_, err = DecodeAll([]byte(minimal + "\n---\n" + strings.Replace(minimal, "replicasPath", "replicaPath", 1)))
	if err == nil || !strings.Contains(err.Error(), "document 2") || !strings.Contains(err.Error(), "replicaPath") {
		t.Fatalf("error = %v, want it to name document 2 and the field", err)
	}
}

func TestDecodeJSONAndRoundTrip(t *testing.T) {
	k, err := Decode([]byte(`{"apiVersion":"run.ai/v1alpha1","kind":"Karta","metadata":{"name":"j","creationTimestamp":"2024-01-01T00:00:00Z"},
	"spec":{"structureDefinition":{"rootComponent":{"name":"r","kind":{"group":"","version":"v1","kind":"Pod"},
	"specDefinition":{"podSpecPath":".spec"},"suspendDefinition":{"suspendActions":[{"path":".spec.x","value":{"a":[1]}}],"resumeActions":[]}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(k, Options{}); err != nil {
		t.Fatal(err)
	}
	if string(k.Spec.StructureDefinition.RootComponent.SuspendDefinition.SuspendActions[0].Value.Raw) != `{"a":[1]}` {
		t.Errorf("suspend value not kept")
	}
}
