package closest

import "testing"

func TestClosest(t *testing.T) {
	specDefinition := []string{"podTemplateSpecPath", "podSpecPath", "metadataPath", "fragmentedPodSpecDefinition"}
	scaleDefinition := []string{"replicasPath", "minReplicasPath", "maxReplicasPath", "replicaSelector"}
	types := []string{"jobset", "jobsets", "jobset.jobset.x-k8s.io", "raycluster", "rayjob", "pytorchjob"}
	for _, tc := range []struct {
		name       string
		in         string
		candidates []string
		want       string
	}{
		{"one slip", "replicaPath", scaleDefinition, "replicasPath"},
		{"a forgotten word in a long name", "podTemplatePath", specDefinition, "podTemplateSpecPath"},
		{"case ignored, candidate returned as spelled", "PODTEMPLATESPECPATH", specDefinition, "podTemplateSpecPath"},
		{"two slips in a short word", "vaule", []string{"key", "value"}, "value"},
		{"short word, too far", "nme", []string{"suspend", "replicatedJobs", "selectors", "free"}, ""},
		{"long word, too far", "parallelism", []string{"name", "replicas", "template"}, ""},
		{"tie goes to the lexically smallest", "jobsett", types, "jobset"},
		{"tie does not depend on order", "jobsett", []string{"jobsets", "jobset"}, "jobset"},
		{"unfinished word", "pytorch", types, "pytorchjob"},
		{"prefix needs three letters", "py", []string{"pytorchjob"}, ""},
		{"nearer beats prefix", "rayj", []string{"rayjobs", "rayjob"}, "rayjob"},
		{"nothing near", "zzz", types, ""},
		{"no candidates", "anything", nil, ""},
		{"empty candidate is not a suggestion", "ab", []string{""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Closest(tc.in, tc.candidates); got != tc.want {
				t.Errorf("Closest(%q, %q) = %q, want %q", tc.in, tc.candidates, got, tc.want)
			}
		})
	}
}

func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"replicaPath", "replicasPath", 1},
		{"podTemplatePath", "podTemplateSpecPath", 4},
		{"jobsett", "jobset", 1},
		{"kitten", "sitting", 3},
		{"größe", "grosse", 3},
	} {
		if got := levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := levenshtein(tc.b, tc.a); got != tc.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
}
