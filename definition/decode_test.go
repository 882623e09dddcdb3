package definition

import (
	"reflect"
	"strings"
	"testing"
)

// TestUnknownFieldSuggestion: a misspelt field gets the nearest known one
// of the same object (the closest package's rule), and a field like none
// gets no guess.
func TestUnknownFieldSuggestion(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		path, want     string // want "" means no suggestion
	}{
		{"one slip", "replicasPath", "replicaPath",
			"spec.structureDefinition.childComponents[0].scaleDefinition.replicaPath", "replicasPath"},
		{"a word left out", "podTemplateSpecPath", "podTemplatePath",
			"spec.structureDefinition.childComponents[0].specDefinition.podTemplatePath", "podTemplateSpecPath"},
		{"case", "ownerRef", "ownerref",
			"spec.structureDefinition.childComponents[0].ownerref", "ownerRef"},
		{"nothing near", "replicasPath", "count",
			"spec.structureDefinition.childComponents[0].scaleDefinition.count", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(strings.Replace(minimal, tc.from+":", tc.to+":", 1)))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.path+": Forbidden: unknown field") {
				t.Errorf("error %q does not name %s as an unknown field", msg, tc.path)
			}
			if tc.want == "" {
				if strings.Contains(msg, "did you mean") {
					t.Errorf("error %q suggests something, want no suggestion", msg)
				}
			} else if !strings.Contains(msg, `did you mean "`+tc.want+`"?`) {
				t.Errorf("error %q does not suggest %q", msg, tc.want)
			}
		})
	}
}

// TestDecodeLegacyResourceInterface: the format's earlier name is read with
// the same fields as a Karta and marked as legacy; a kind that does not go
// with its apiVersion is refused with the field and the pair to use.
func TestDecodeLegacyResourceInterface(t *testing.T) {
	legacy := strings.Replace(strings.Replace(minimal, "run.ai/v1alpha1", "optimization.nvidia.com/v1alpha1", 1), "kind: Karta", "kind: ResourceInterface", 1)
	for _, tc := range []struct {
		name, yaml string
		legacy     bool
		wantErr    string // "" means it decodes
	}{
		{"karta", minimal, false, ""},
		{"resource interface", legacy, true, ""},
		{"old apiVersion with kind Karta", strings.Replace(legacy, "kind: ResourceInterface", "kind: Karta", 1), false,
			`kind: Invalid value: "Karta": must be ResourceInterface with apiVersion optimization.nvidia.com/v1alpha1`},
		{"new apiVersion with kind ResourceInterface", strings.Replace(minimal, "kind: Karta", "kind: ResourceInterface", 1), false,
			`kind: Invalid value: "ResourceInterface": must be Karta (ResourceInterface goes with the deprecated apiVersion optimization.nvidia.com/v1alpha1)`},
		{"other apiVersion", strings.Replace(minimal, "run.ai/v1alpha1", "optimization.nvidia.com/v1beta1", 1), false,
			`must be run.ai/v1alpha1 (or the deprecated optimization.nvidia.com/v1alpha1 with kind ResourceInterface)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Decode([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if IsLegacy(k) != tc.legacy {
				t.Errorf("IsLegacy = %v, want %v", IsLegacy(k), tc.legacy)
			}
			// The same fields, the same compiled definition.
			want, err := Decode([]byte(minimal))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(k.Spec, want.Spec) || k.Name != want.Name {
				t.Errorf("decoded spec differs from the Karta form:\n%+v\n%+v", k.Spec, want.Spec)
			}
			if _, err := Compile(k, Options{}); err != nil {
				t.Errorf("compile: %v", err)
			}
		})
	}
	if n := LegacyNotice("x"); !strings.Contains(n, "deprecated") || !strings.Contains(n, "muster validate --convert") {
		t.Errorf("notice %q does not say it is deprecated and how to convert", n)
	}
	if IsLegacy(nil) {
		t.Error("IsLegacy(nil) = true")
	}
}

// TestDecodeAllMixesFormats: one stream may hold both forms; each document
// keeps its own type.
func TestDecodeAllMixesFormats(t *testing.T) {
	legacy := strings.Replace(strings.Replace(minimal, "run.ai/v1alpha1", "optimization.nvidia.com/v1alpha1", 1), "kind: Karta", "kind: ResourceInterface", 1)
	ks, err := DecodeAll([]byte(minimal + "\n---\n" + legacy))
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || IsLegacy(ks[0]) || !IsLegacy(ks[1]) {
		t.Fatalf("got %d documents, legacy flags wrong: %+v", len(ks), ks)
	}
}
