package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLimitComponents: the kept components are those that need a look
// (unready pods, then missing pods) before the others, shown in definition
// order; offline views keep definition order.
func TestLimitComponents(t *testing.T) {
	comp := func(name string, desired, observed, ready int64) ComponentView {
		return ComponentView{Name: name, Parent: "root", HasPods: true, Pods: PodCounts{Desired: desired, Observed: observed, Ready: ready}}
	}
	d := &Description{Live: true, Components: []ComponentView{
		{Name: "root"},
		comp("ok1", 2, 2, 2),
		comp("missing", 2, 1, 1),
		comp("ok2", 1, 1, 1),
		comp("unready", 2, 2, 1),
	}}
	kids := []int{1, 2, 3, 4}
	for _, tc := range []struct {
		limit  int
		live   bool
		kept   []int
		hidden int
	}{
		{0, true, []int{1, 2, 3, 4}, 0},
		{4, true, []int{1, 2, 3, 4}, 0},
		{1, true, []int{4}, 3},
		{2, true, []int{2, 4}, 2},
		{3, true, []int{1, 2, 4}, 1},
		{2, false, []int{1, 2}, 2},
	} {
		d.Live = tc.live
		kept, hidden := limitComponents(d, kids, tc.limit)
		if !slices.Equal(kept, tc.kept) || hidden != tc.hidden {
			t.Errorf("limit %d live %v: kept %v hidden %d; want %v and %d", tc.limit, tc.live, kept, hidden, tc.kept, tc.hidden)
		}
	}
}

// fourRoles defines a kind with four pod-bearing roles under the root.
const fourRoles = `apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: four}
spec:
  structureDefinition:
    rootComponent:
      name: app
      kind: {group: acme.example.com, version: v1, kind: App}
    childComponents:
    - {name: a, ownerRef: app, specDefinition: {podTemplateSpecPath: .spec.t}, scaleDefinition: {replicasPath: .spec.n}}
    - {name: b, ownerRef: app, specDefinition: {podTemplateSpecPath: .spec.t}, scaleDefinition: {replicasPath: .spec.n}}
    - {name: c, ownerRef: app, specDefinition: {podTemplateSpecPath: .spec.t}, scaleDefinition: {replicasPath: .spec.n}}
    - {name: d, ownerRef: app, specDefinition: {podTemplateSpecPath: .spec.t}, scaleDefinition: {replicasPath: .spec.n}}
`

// TestDescribeComponentLimit: the table shows at most N components under a
// parent and says how many more there are; JSON keeps them all.
func TestDescribeComponentLimit(t *testing.T) {
	dir := t.TempDir()
	def := writeTemp(t, dir, "four.yaml", fourRoles)
	obj := "apiVersion: acme.example.com/v1\nkind: App\nmetadata: {name: x, namespace: ns}\nspec: {n: 1, t: {spec: {containers: [{name: c, image: i}]}}}\n"
	res := run(t, nil, obj, "describe", "-f", "-", "--definition", def, "--component-limit", "2", "--color", "never")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{"├─ a", "├─ b", "└─ … 2 more components (--component-limit 0 shows all)"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "─ c") || strings.Contains(res.stdout, "─ d") {
		t.Errorf("components beyond the limit are shown:\n%s", res.stdout)
	}
	res = run(t, nil, obj, "describe", "-f", "-", "--definition", def, "--component-limit", "2", "-o", "json")
	if res.code != 0 || strings.Count(res.stdout, `"parent": "app"`) != 4 {
		t.Errorf("JSON must keep every component: exit %d\n%s", res.code, res.stdout)
	}
	res = run(t, nil, obj, "describe", "-f", "-", "--definition", def, "--color", "never")
	if !strings.Contains(res.stdout, "└─ d") || strings.Contains(res.stdout, "more components") {
		t.Errorf("without a limit every component is shown:\n%s", res.stdout)
	}
}

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
