package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
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
