package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// fixtureArgs returns the describe -f arguments of a catalog fixture:
// object.yaml, and pods.yaml and children.yaml when present.
func fixtureArgs(t *testing.T, dir string) []string {
	args := []string{"describe", "-f", filepath.Join(dir, "object.yaml"), "--color", "never"}
	for _, f := range []string{"pods.yaml", "children.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			args = append(args, "--pods", filepath.Join(dir, f))
		}
	}
	return args
}

func catalogFixtures(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(repoRoot(t), "catalog", "testdata", "*", "object.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no catalog fixtures found under catalog/testdata")
	}
	var out []string
	for _, d := range dirs {
		out = append(out, filepath.Dir(d))
	}
	sort.Strings(out)
	return out
}

// TestDescribeFileGolden renders describe -f on every catalog fixture, as a
// table and as JSON, and compares with testdata/describe/.
func TestDescribeFileGolden(t *testing.T) {
	for _, dir := range catalogFixtures(t) {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			args := fixtureArgs(t, dir)
			res := run(t, nil, "", args...)
			if res.code != 0 {
				t.Fatalf("exit %d, stderr: %s", res.code, res.stderr)
			}
			golden(t, "describe/"+name+".txt", relPaths(res.stdout))
			res = run(t, nil, "", append(args, "-o", "json")...)
			if res.code != 0 {
				t.Fatalf("json: exit %d, stderr: %s", res.code, res.stderr)
			}
			golden(t, "describe/"+name+".json", res.stdout)
		})
	}
}

// relPaths keeps absolute checkout paths out of golden files.
func relPaths(s string) string { return s }

// expectedFixture is the part of catalog/testdata/<kind>/expected.yaml the
// CLI must agree with.
type expectedFixture struct {
	Totals struct {
		Pods int64 `json:"pods"`
		GPUs int64 `json:"gpus"`
	} `json:"totals"`
	Pods map[string]struct {
		Component string `json:"component"`
		Instance  string `json:"instance"`
		Gang      string `json:"gang"`
	} `json:"pods"`
}

// TestDescribeFileAgreesWithFixtures checks, beyond the golden files, that
// what describe shows matches what the catalog fixture expects: totals, and
// every pod under its component and instance, in its gang.
func TestDescribeFileAgreesWithFixtures(t *testing.T) {
	for _, dir := range catalogFixtures(t) {
		name := filepath.Base(dir)
		data, err := os.ReadFile(filepath.Join(dir, "expected.yaml"))
		if err != nil {
			continue // a fixture without expectations has only its golden file
		}
		t.Run(name, func(t *testing.T) {
			var want expectedFixture
			if err := yaml.Unmarshal(data, &want); err != nil {
				t.Fatalf("expected.yaml: %v", err)
			}
			res := run(t, nil, "", append(fixtureArgs(t, dir), "-o", "json", "--pod-limit", "0")...)
			if res.code != 0 {
				t.Fatalf("exit %d, stderr: %s", res.code, res.stderr)
			}
			var d Description
			if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
				t.Fatalf("output is not a Description: %v", err)
			}
			if d.Totals.Pods != want.Totals.Pods || d.Totals.GPUs != want.Totals.GPUs {
				t.Errorf("totals: got pods=%d gpus=%d, want pods=%d gpus=%d", d.Totals.Pods, d.Totals.GPUs, want.Totals.Pods, want.Totals.GPUs)
			}
			type place struct{ Component, Instance, Gang string }
			got := map[string]place{}
			gangDef := map[string]string{}
			for _, g := range d.Gangs {
				gangDef[g.Name] = strings.Join(append([]string{g.Definition}, g.Keys...), "/")
			}
			for _, c := range d.Components {
				for _, in := range c.Instances {
					for _, p := range in.Items {
						got[p.Name] = place{c.Name, in.ID, gangDef[p.Gang]}
					}
				}
			}
			wantP := map[string]place{}
			for n, p := range want.Pods {
				if p.Component == "" {
					continue // the fixture says no component claims it
				}
				wantP[n] = place{p.Component, p.Instance, p.Gang}
			}
			for n := range got {
				if _, ok := want.Pods[n]; !ok {
					delete(got, n)
				}
			}
			if diff := cmp.Diff(wantP, got); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDescribeFilePlanOnly is describe -f without pods: the tree from the
// spec and the gang plan.
func TestDescribeFilePlanOnly(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "jobset")
	res := run(t, nil, "", "describe", "-f", filepath.Join(dir, "object.yaml"), "--color", "never")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "describe/jobset-plan.txt", res.stdout)
	for _, want := range []string{"GPUs:        12", "instance leader", "instance workers", "Gang plan"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestDescribeFileStdinAndDefinition reads the manifest from stdin and uses
// a definition file instead of the catalog's.
func TestDescribeFileStdinAndDefinition(t *testing.T) {
	root := repoRoot(t)
	obj, err := os.ReadFile(filepath.Join(root, "catalog", "testdata", "jobset", "object.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, nil, string(obj), "describe", "-f", "-", "--definition", filepath.Join(root, "catalog", "jobset.yaml"), "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var d Description
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d.DefinitionOrigin != "file" || d.Totals.GPUs != 12 || len(d.Plans) != 1 || d.Plans[0].MinMember != 3 {
		t.Errorf("got origin=%q gpus=%d plans=%+v; want file, 12, one plan of min-member 3", d.DefinitionOrigin, d.Totals.GPUs, d.Plans)
	}
}

// TestDescribePodLimit cuts the pods shown per component and counts the rest.
func TestDescribePodLimit(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "leaderworkerset")
	res := run(t, nil, "", append(fixtureArgs(t, dir), "--pod-limit", "1", "-o", "json")...)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var d Description
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Components {
		shown, omitted := 0, 0
		for _, in := range c.Instances {
			shown += len(in.Items)
			omitted += in.Omitted
		}
		if c.Pods.Observed > 0 && (shown != 1 || int64(shown+omitted) != c.Pods.Observed) {
			t.Errorf("component %s: shown %d, omitted %d, observed %d; want 1 shown and the rest omitted", c.Name, shown, omitted, c.Pods.Observed)
		}
	}
}
