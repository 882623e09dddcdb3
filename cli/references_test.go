package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDescribeOfflineReferences: offline, a TrainJob's runtime is found
// among the documents given and sizes the gang; without it describe says
// the reference was not resolved and what it assumed.
func TestDescribeOfflineReferences(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "trainjob", "runtime")
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for _, tc := range []struct {
		name, stdin string
		minMember   int32
		gpus        string
		warning     string
	}{
		{"runtime in the same input", read("object.yaml") + "\n---\n" + read("references.yaml"), 4, "32", ""},
		{"runtime missing", read("object.yaml"), 1, "",
			"reference $runtime (TrainingRuntime train/torch-8gpu) not resolved: not in the files given; assumed null, so the definition's fallbacks apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, nil, tc.stdin, "describe", "-f", "-", "-o", "json")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			var d Description
			if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
				t.Fatal(err)
			}
			if len(d.Plans) != 1 || d.Plans[0].MinMember != tc.minMember || d.Plans[0].MinResources["nvidia.com/gpu"] != tc.gpus {
				t.Errorf("plans %+v, want one of min-member %d and %q GPUs", d.Plans, tc.minMember, tc.gpus)
			}
			joined := strings.Join(d.Warnings, "\n")
			if tc.warning == "" && strings.Contains(joined, "not resolved") || !strings.Contains(joined, tc.warning) {
				t.Errorf("warnings %q, want %q", d.Warnings, tc.warning)
			}
		})
	}
}
