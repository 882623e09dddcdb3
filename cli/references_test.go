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

// TestFitFileReferences: fit -f sizes a TrainJob by the runtime in the same
// file, and says what it assumed without it.
func TestFitFileReferences(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "trainjob", "runtime")
	var docs []string
	for _, f := range []string{"object.yaml", "references.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	for _, tc := range []struct {
		name      string
		content   string
		minMember int
		warning   string
	}{
		{"with runtime", strings.Join(docs, "\n---\n"), 4, ""},
		{"without runtime", docs[0], 1, "reference $runtime (TrainingRuntime train/torch-8gpu) not resolved: not in the files given; assumed null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tj.yaml")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			res := run(t, clusterA(t), "", "fit", "-f", path, "-o", "json")
			r := decodeFit(t, res.stdout)
			if len(r.Clusters) != 1 || len(r.Clusters[0].Workloads) != 1 || len(r.Clusters[0].Workloads[0].Gangs) != 1 {
				t.Fatalf("fit report %s (stderr %s)", res.stdout, res.stderr)
			}
			if g := r.Clusters[0].Workloads[0].Gangs[0]; g.MinMember != tc.minMember {
				t.Errorf("gang min-member %d, want %d", g.MinMember, tc.minMember)
			}
			joined := strings.Join(r.Clusters[0].Warnings, "\n")
			if tc.warning == "" && strings.Contains(joined, "not resolved") || !strings.Contains(joined, tc.warning) {
				t.Errorf("warnings %q, want %q", r.Clusters[0].Warnings, tc.warning)
			}
		})
	}
}
