package definition

import (
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
