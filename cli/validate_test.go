package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/muster-io/muster/definition"
)

func TestValidate(t *testing.T) {
	td := filepath.Join("testdata", "validate")
	crd := filepath.Join(td, "trainer-crd.yaml")
	tests := []struct {
		name string
		args []string
		code int
		// goldenName is compared with stdout when set.
		goldenName string
		stderr     string
	}{
		{name: "valid", args: []string{filepath.Join(td, "trainer-def.yaml")}, code: ExitOK, goldenName: "valid.txt"},
		{name: "valid against CRD", args: []string{filepath.Join(td, "trainer-def.yaml"), "--crd", crd}, code: ExitOK, goldenName: "valid-crd.txt"},
		{name: "catalog definition", args: []string{filepath.Join(repoRoot(t), "catalog", "jobset.yaml")}, code: ExitOK},
		{name: "paths that cannot exist", args: []string{filepath.Join(td, "typos.yaml"), "--crd", crd}, code: ExitInvalid, goldenName: "typos-crd.txt", stderr: "1 of 1 definitions invalid"},
		{name: "typos pass without CRD", args: []string{filepath.Join(td, "typos.yaml")}, code: ExitOK},
		{name: "invalid multi-doc", args: []string{filepath.Join(td, "invalid.yaml")}, code: ExitInvalid, goldenName: "invalid.txt", stderr: "1 of 2 definitions invalid"},
		{name: "unknown field", args: []string{filepath.Join(td, "unknown-field.yaml")}, code: ExitInvalid, goldenName: "unknown-field.txt"},
		{name: "not yaml", args: []string{filepath.Join(td, "broken.yaml")}, code: ExitUsage, stderr: "not YAML or JSON"},
		{name: "missing file", args: []string{filepath.Join(td, "nope.yaml")}, code: ExitUsage, stderr: "no such file"},
		{name: "missing CRD file", args: []string{filepath.Join(td, "trainer-def.yaml"), "--crd", "nope.yaml"}, code: ExitUsage, stderr: "cannot read nope.yaml"},
		{name: "both crd and cluster", args: []string{filepath.Join(td, "trainer-def.yaml"), "--crd", crd, "--cluster"}, code: ExitUsage},
		{name: "no file", args: nil, code: ExitUsage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, nil, "", append([]string{"validate", "--color", "never"}, tc.args...)...)
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", res.code, tc.code, res.stdout, res.stderr)
			}
			if tc.goldenName != "" {
				golden(t, "validate/"+tc.goldenName, res.stdout)
			}
			if !strings.Contains(res.stderr, tc.stderr) {
				t.Errorf("stderr %q lacks %q", res.stderr, tc.stderr)
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	td := filepath.Join("testdata", "validate")
	res := run(t, nil, "", "validate", filepath.Join(td, "typos.yaml"), "--crd", filepath.Join(td, "trainer-crd.yaml"), "-o", "json")
	if res.code != ExitInvalid {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var r ValidationResult
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.Valid || len(r.Definitions) != 1 || !r.Definitions[0].SchemaChecked || len(r.Definitions[0].Problems) != 2 {
		t.Errorf("got %+v; want one invalid, schema-checked definition with 2 problems", r)
	}
}

// TestValidateStdin reads the definition from standard input.
func TestValidateStdin(t *testing.T) {
	res := run(t, nil, "apiVersion: run.ai/v1alpha1\nkind: Karta\nmetadata: {name: x}\nspec: {structureDefinition: {rootComponent: {name: r}}}\n", "validate", "-")
	if res.code != ExitInvalid || !strings.Contains(res.stdout, "x: invalid") {
		t.Errorf("exit %d, stdout %q: want an invalid definition x (root without kind)", res.code, res.stdout)
	}
}

// TestValidateLegacy: a ResourceInterface (the format's earlier name) is
// valid with a deprecation warning on stderr and in the JSON report, and
// --convert prints it, and every other document, as a Karta that decodes
// back to the same definition.
func TestValidateLegacy(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "catalog", "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	karta := string(data)
	legacy := strings.Replace(strings.Replace(karta, "apiVersion: run.ai/v1alpha1", "apiVersion: optimization.nvidia.com/v1alpha1", 1),
		"kind: Karta", "kind: ResourceInterface", 1)
	if legacy == karta {
		t.Fatal("catalog/job.yaml does not start with the Karta type")
	}
	both := legacy + "\n---\n" + strings.Replace(karta, "name: job\n", "name: job2\n", 1)

	res := run(t, nil, both, "validate", "-")
	if res.code != ExitOK || !strings.Contains(res.stderr, `warning: -: definition "job" is a optimization.nvidia.com/v1alpha1 ResourceInterface`) ||
		strings.Contains(res.stderr, "job2") {
		t.Errorf("validate: exit %d, stderr %q: want valid with one deprecation warning for job", res.code, res.stderr)
	}

	res = run(t, nil, both, "validate", "-", "-o", "json")
	var r ValidationResult
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatalf("%v: %s", err, res.stdout)
	}
	if len(r.Definitions) != 2 || !strings.Contains(r.Definitions[0].Deprecated, "deprecated") || r.Definitions[1].Deprecated != "" {
		t.Errorf("JSON report %+v: want job deprecated, job2 not", r.Definitions)
	}

	res = run(t, nil, both, "validate", "-", "--convert")
	if res.code != ExitOK {
		t.Fatalf("convert: exit %d, stderr %q", res.code, res.stderr)
	}
	if strings.Contains(res.stdout, "ResourceInterface") || strings.Contains(res.stdout, "optimization.nvidia.com") {
		t.Errorf("converted output still names the old type:\n%s", res.stdout)
	}
	ks, err := definition.DecodeAll([]byte(res.stdout))
	if err != nil {
		t.Fatalf("converted output does not decode: %v\n%s", err, res.stdout)
	}
	want, err := definition.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || definition.IsLegacy(ks[0]) || ks[0].Name != "job" || ks[1].Name != "job2" || !reflect.DeepEqual(ks[0].Spec, want.Spec) {
		t.Errorf("converted %d definitions; want job (same spec as catalog/job.yaml) and job2", len(ks))
	}

	res = run(t, nil, legacy, "validate", "-", "--convert", "-o", "json")
	if k, err := definition.Decode([]byte(res.stdout)); err != nil || definition.IsLegacy(k) {
		t.Errorf("convert -o json: %v, output %q", err, res.stdout)
	}

	// describe --definition reads it too, with the warning.
	defFile := filepath.Join(t.TempDir(), "legacy-job.yaml")
	if err := os.WriteFile(defFile, []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	job := "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: x}\nspec: {parallelism: 2, template: {spec: {containers: [{name: c, image: i}]}}}\n"
	res = run(t, nil, job, "describe", "-f", "-", "--definition", defFile, "-o", "json")
	if res.code != ExitOK || !strings.Contains(res.stderr, "warning: "+defFile+`: definition "job" is a optimization.nvidia.com/v1alpha1 ResourceInterface`) ||
		!strings.Contains(res.stdout, `"definition": "job"`) {
		t.Errorf("describe --definition legacy: exit %d, stderr %q, stdout %.200q", res.code, res.stderr, res.stdout)
	}

	// An invalid document: nothing is printed, the problem is named.
	res = run(t, nil, strings.Replace(legacy, "replicasPath", "replicaPath", 1), "validate", "-", "--convert")
	if res.code != ExitInvalid || res.stdout != "" || !strings.Contains(res.stderr, "replicaPath") {
		t.Errorf("convert invalid: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}
