package rbacgen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
)

// repoRoot is the module root, two levels up from this package.
const repoRoot = "../.."

// GeneratedFiles are the checked-in copies of the generated role: the
// kustomize tree and the Helm chart. `make rbac` writes both.
var GeneratedFiles = []string{
	"manifests/rbac/podgrouper-catalog-read.yaml",
	"manifests/helm/muster/templates/podgrouper-catalog-read.yaml",
}

func embedded(t *testing.T) []*kartav1alpha1.Karta {
	t.Helper()
	defs, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) == 0 {
		t.Fatal("the embedded catalog is empty")
	}
	return defs
}

func embeddedWrappers(t *testing.T) []Wrapper {
	t.Helper()
	ws, err := catalog.Wrappers()
	if err != nil {
		t.Fatal(err)
	}
	return CatalogWrappers(ws)
}

func readRule(gr schema.GroupResource) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{gr.Group}, Resources: []string{gr.Resource}, Verbs: ReadVerbs}
}

// TestEveryCatalogKindReadable is the guarantee behind the generated role:
// every root, child component kind and additionalChildKind of every embedded
// definition is readable under it, except the withheld resources, which are
// not.
func TestEveryCatalogKindReadable(t *testing.T) {
	defs := embedded(t)
	ws := embeddedWrappers(t)
	role, _, err := CatalogReadRole(defs, ws...)
	if err != nil {
		t.Fatal(err)
	}
	// The wrappers too: the owner walk reads them to pass over them.
	for _, w := range ws {
		gr := schema.GroupResource{Group: w.GVK.Group, Resource: Plural(w.GVK.GroupKind())}
		if covered, missing := validation.Covers(role.Rules, []rbacv1.PolicyRule{readRule(gr)}); !covered {
			t.Errorf("wrapper %s: %s is not readable under %s: missing %v", w.Name, gr, CatalogReadRoleName, missing)
		}
	}
	if len(ws) == 0 {
		t.Error("the catalog has no wrappers; this check checks nothing")
	}
	checked := 0
	for _, d := range defs {
		sd := d.Spec.StructureDefinition
		var gvks []*kartav1alpha1.GroupVersionKind
		gvks = append(gvks, sd.RootComponent.Kind)
		for _, c := range sd.ChildComponents {
			gvks = append(gvks, c.Kind)
		}
		for i := range sd.AdditionalChildKinds {
			gvks = append(gvks, &sd.AdditionalChildKinds[i])
		}
		for _, g := range gvks {
			if g == nil {
				continue // logical child component
			}
			gr := schema.GroupResource{Group: g.Group, Resource: Plural(schema.GroupKind{Group: g.Group, Kind: g.Kind})}
			covered, missing := validation.Covers(role.Rules, []rbacv1.PolicyRule{readRule(gr)})
			if _, withheld := Withheld[gr]; withheld {
				if covered {
					t.Errorf("definition %s: %s is withheld but the generated role grants it", d.Name, gr)
				}
				continue
			}
			if !covered {
				t.Errorf("definition %s: kind %s/%s %s (resource %s) is not readable under %s: missing %v",
					d.Name, g.Group, g.Version, g.Kind, gr, CatalogReadRoleName, missing)
			}
			checked++
		}
	}
	if checked < len(defs) {
		t.Fatalf("checked only %d kinds for %d definitions", checked, len(defs))
	}
}

// TestRoleIsReadOnly: the generated role never grants a verb beyond
// get/list/watch, a wildcard or a subresource.
func TestRoleIsReadOnly(t *testing.T) {
	role, _, err := CatalogReadRole(embedded(t), embeddedWrappers(t)...)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]bool{}
	for _, r := range role.Rules {
		if strings.Join(r.Verbs, ",") != "get,list,watch" {
			t.Errorf("rule %v: verbs %v, want get,list,watch", r.APIGroups, r.Verbs)
		}
		if len(r.APIGroups) != 1 {
			t.Errorf("rule %v: want one API group per rule", r.APIGroups)
		} else if groups[r.APIGroups[0]] {
			t.Errorf("API group %q has more than one rule", r.APIGroups[0])
		} else {
			groups[r.APIGroups[0]] = true
		}
		for _, res := range r.Resources {
			if res == "*" || strings.Contains(res, "/") {
				t.Errorf("rule %v: resource %q is a wildcard or subresource", r.APIGroups, res)
			}
		}
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %v: unexpected resourceNames/nonResourceURLs", r.APIGroups)
		}
	}
	// A missed kind would be caught above; an extra one here: the role may
	// name only resources of catalog kinds.
	kinds, err := Kinds(embedded(t), embeddedWrappers(t)...)
	if err != nil {
		t.Fatal(err)
	}
	known := map[schema.GroupResource]bool{}
	for _, k := range kinds {
		known[k.Resource.GroupResource()] = true
	}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if gr := (schema.GroupResource{Group: r.APIGroups[0], Resource: res}); !known[gr] {
				t.Errorf("role grants %s, which no catalog kind maps to", gr)
			}
		}
	}
}

// TestGeneratedFilesUpToDate fails when the catalog changed and `make rbac`
// was not run.
func TestGeneratedFilesUpToDate(t *testing.T) {
	defs := embedded(t)
	role, kinds, err := CatalogReadRole(defs, embeddedWrappers(t)...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Render(role, kinds)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range GeneratedFiles {
		got, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Errorf("%s: %v (run make rbac)", f, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the role generated from the catalog; run make rbac", f)
		}
		var back rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(got, &back); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		group, kind, want string
	}{
		{"", "Pod", "pods"},
		{"", "Service", "services"},
		{"", "Endpoints", "endpoints"},
		{"", "PersistentVolumeClaim", "persistentvolumeclaims"},
		{"networking.k8s.io", "Ingress", "ingresses"},
		{"milvus.io", "Milvus", "milvuses"},
		{"policy", "PodDisruptionBudget", "poddisruptionbudgets"},
		{"example.com", "Policy", "policies"},
		{"example.com", "Gateway", "gateways"},
		{"example.com", "Proxy", "proxies"},
		{"example.com", "Batch", "batches"},
		{"example.com", "Mesh", "meshes"},
		{"gateway.networking.k8s.io", "HTTPRoute", "httproutes"},
		{"apps.nvidia.com", "NIMService", "nimservices"},
		{"autoscaling", "HorizontalPodAutoscaler", "horizontalpodautoscalers"},
	} {
		if got := Plural(schema.GroupKind{Group: tc.group, Kind: tc.kind}); got != tc.want {
			t.Errorf("Plural(%s/%s) = %q, want %q", tc.group, tc.kind, got, tc.want)
		}
	}
}

func TestKindsErrors(t *testing.T) {
	root := func(k *kartav1alpha1.GroupVersionKind) *kartav1alpha1.Karta {
		d := &kartav1alpha1.Karta{}
		d.Name = "broken"
		d.Spec.StructureDefinition.RootComponent = kartav1alpha1.ComponentDefinition{Name: "r", Kind: k}
		return d
	}
	for _, tc := range []struct {
		name string
		def  *kartav1alpha1.Karta
		want string
	}{
		{"no root kind", root(nil), "definition broken: spec.structureDefinition.rootComponent.kind is required"},
		{"no version", root(&kartav1alpha1.GroupVersionKind{Group: "g", Kind: "K"}), "definition broken: root: kind needs version and kind"},
		{"no kind in additional", func() *kartav1alpha1.Karta {
			d := root(&kartav1alpha1.GroupVersionKind{Group: "g", Version: "v1", Kind: "K"})
			d.Spec.StructureDefinition.AdditionalChildKinds = []kartav1alpha1.GroupVersionKind{{Group: "g", Version: "v1"}}
			return d
		}(), "definition broken: additionalChildKinds[0]: kind needs version and kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Kinds([]*kartav1alpha1.Karta{tc.def})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestKindsMergeVersions: one resource listed once even when two versions
// or two definitions name it; a logical child (no kind) adds nothing.
func TestKindsMergeVersions(t *testing.T) {
	mk := func(name, version string) *kartav1alpha1.Karta {
		d := &kartav1alpha1.Karta{}
		d.Name = name
		d.Spec.StructureDefinition.RootComponent = kartav1alpha1.ComponentDefinition{Name: "r",
			Kind: &kartav1alpha1.GroupVersionKind{Group: "ex.io", Version: version, Kind: "Thing"}}
		d.Spec.StructureDefinition.ChildComponents = []kartav1alpha1.ComponentDefinition{{Name: "logical", OwnerRef: ptrTo("r")}}
		return d
	}
	role, kinds, err := CatalogReadRole([]*kartav1alpha1.Karta{mk("a", "v1"), mk("b", "v2")})
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 2 {
		t.Fatalf("kinds = %d, want 2 (one per version)", len(kinds))
	}
	if len(role.Rules) != 1 || strings.Join(role.Rules[0].Resources, ",") != "things" {
		t.Fatalf("rules = %+v, want one rule for things", role.Rules)
	}
}

// TestPluralsMatchCorpusCRDs checks the kind → resource guess against the
// real CRDs of the frameworks (../shared/corpus), for every catalog kind
// whose CRD is there.
func TestPluralsMatchCorpusCRDs(t *testing.T) {
	if testing.Short() {
		t.Skip("reads every corpus CRD; not in -short")
	}
	corpus := filepath.Join(repoRoot, "..", "shared", "corpus")
	if _, err := os.Stat(corpus); err != nil {
		t.Skipf("corpus not present at %s", corpus)
	}
	plurals := map[schema.GroupKind]string{}
	err := filepath.WalkDir(corpus, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.Contains(filepath.ToSlash(p), "/crd/") || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufioReader(data))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			var crd struct {
				Kind string `json:"kind"`
				Spec struct {
					Group string `json:"group"`
					Names struct {
						Kind   string `json:"kind"`
						Plural string `json:"plural"`
					} `json:"names"`
				} `json:"spec"`
			}
			if yaml.Unmarshal(doc, &crd) != nil || crd.Kind != "CustomResourceDefinition" {
				continue
			}
			plurals[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Spec.Names.Plural
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := Kinds(embedded(t))
	if err != nil {
		t.Fatal(err)
	}
	matched := 0
	for _, k := range kinds {
		want, ok := plurals[k.GVK.GroupKind()]
		if !ok {
			continue
		}
		matched++
		if k.Resource.Resource != want {
			t.Errorf("%s: generated resource %q, the CRD says %q (add it to irregularPlurals)", k.GVK.GroupKind(), k.Resource.Resource, want)
		}
	}
	if matched < 10 {
		t.Errorf("only %d catalog kinds found among %d corpus CRDs; is the corpus layout changed?", matched, len(plurals))
	}
	t.Logf("%d catalog kinds checked against corpus CRDs", matched)
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
func ptrTo[T any](v T) *T                   { return &v }
