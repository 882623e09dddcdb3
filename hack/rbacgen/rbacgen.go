// Package rbacgen derives the pod-grouper's read access from the workload
// catalog: every kind a definition names (the root, the kinds of its child
// components, its additionalChildKinds and the kinds of its references,
// muster.io/references) becomes a get/list/watch grant in
// one generated ClusterRole, so muster asks for exactly what its definitions
// need to follow owner chains and read workload roots, and nothing more.
//
// Kind → resource: the generator needs the plural resource name of each kind
// without a cluster and without the frameworks' CRDs (a fresh clone has
// neither), so it lowercases the kind and applies the English plural rules
// the Kubernetes API conventions use (-s, -es after s/x/z/ch/sh, -ies after a
// consonant + y), with a small explicit table for kinds whose CRD declares
// another plural. Tests
// cross-check every guess against the CRDs of the shared corpus (when
// present) and, in test/e2e, against the discovery of a real apiserver for
// the built-in kinds, so a wrong guess fails a test instead of shipping a
// role that reads nothing.
package rbacgen

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
)

// CatalogReadRoleName is the generated ClusterRole.
const CatalogReadRoleName = "muster-podgrouper-catalog-read"

// ReadVerbs are the only verbs the generated role grants.
var ReadVerbs = []string{"get", "list", "watch"}

// irregularPlurals maps kinds whose resource name is not the regular plural
// of the lowercased kind. Keys are group/Kind; add a row when a catalog kind
// is served under another name (the corpus test says which).
var irregularPlurals = map[schema.GroupKind]string{
	// Endpoints is already plural; listed so a future catalog entry gets it right.
	{Group: "", Kind: "Endpoints"}: "endpoints",
}

// Withheld are resources the generated role never grants even when a
// definition lists them: reading them cluster-wide gives credentials (every
// service-account token and pull secret in the cluster), which is far more
// than following owner references needs. A pod is never owned by a Secret,
// so the pod-grouper loses nothing. An admin who wants it anyway adds it
// through the aggregated role (see manifests/README.md).
var Withheld = map[schema.GroupResource]string{
	{Group: "", Resource: "secrets"}: "credentials; never an owner of a pod",
}

// Source says where a kind was found.
type Source struct {
	Definition string // definition name
	Where      string // "root", "child <component>", "additionalChildKinds"
}

// Kind is one kind named by the catalog with its resource and the places
// that name it.
type Kind struct {
	GVK      schema.GroupVersionKind
	Resource schema.GroupVersionResource
	Sources  []Source
}

// Plural returns the resource name of a kind (see the package comment).
func Plural(gk schema.GroupKind) string {
	if p, ok := irregularPlurals[gk]; ok {
		return p
	}
	return regularPlural(strings.ToLower(gk.Kind))
}

// regularPlural is the English plural the API conventions use for resource
// names. Not meta.UnsafeGuessKindToResource: it turns every trailing "y"
// into "ies" (Gateway → gatewaies), which is wrong after a vowel.
func regularPlural(s string) string {
	switch {
	case s == "":
		return s
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case strings.HasSuffix(s, "y") && len(s) > 1 && !strings.ContainsRune("aeiou", rune(s[len(s)-2])):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}

// Wrapper is a kind that owns workloads but has no definition (the
// catalog's wrappers): the pod-grouper's owner walk reads it to pass over
// it, so the role grants it too.
type Wrapper struct {
	Name string // the wrapper's name in the catalog
	GVK  schema.GroupVersionKind
}

// CatalogWrappers converts the catalog's wrappers for the generator.
func CatalogWrappers(ws []catalog.Wrapper) []Wrapper {
	out := make([]Wrapper, 0, len(ws))
	for _, w := range ws {
		out = append(out, Wrapper{Name: w.Name, GVK: schema.GroupVersionKind{Group: w.Kind.Group, Version: w.Kind.Version, Kind: w.Kind.Kind}})
	}
	return out
}

// Kinds collects every kind the definitions and wrappers name, sorted by
// group, kind and version. A definition whose root has no kind, or a kind
// entry without version or kind, is an error naming the definition and
// field.
func Kinds(defs []*kartav1alpha1.Karta, wrappers ...Wrapper) ([]Kind, error) {
	byGVK := map[schema.GroupVersionKind]*Kind{}
	add := func(def string, where string, g *kartav1alpha1.GroupVersionKind) error {
		if g == nil {
			return nil
		}
		if g.Kind == "" || g.Version == "" {
			return fmt.Errorf("definition %s: %s: kind needs version and kind, got %q/%q/%q", def, where, g.Group, g.Version, g.Kind)
		}
		gvk := schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}
		k, ok := byGVK[gvk]
		if !ok {
			k = &Kind{GVK: gvk, Resource: gvk.GroupVersion().WithResource(Plural(gvk.GroupKind()))}
			byGVK[gvk] = k
		}
		k.Sources = append(k.Sources, Source{Definition: def, Where: where})
		return nil
	}
	for _, d := range defs {
		if d == nil {
			continue
		}
		sd := d.Spec.StructureDefinition
		if sd.RootComponent.Kind == nil {
			return nil, fmt.Errorf("definition %s: spec.structureDefinition.rootComponent.kind is required", d.Name)
		}
		if err := add(d.Name, "root", sd.RootComponent.Kind); err != nil {
			return nil, err
		}
		for i, c := range sd.ChildComponents {
			if err := add(d.Name, fmt.Sprintf("childComponents[%d] %s", i, c.Name), c.Kind); err != nil {
				return nil, err
			}
		}
		for i := range sd.AdditionalChildKinds {
			if err := add(d.Name, fmt.Sprintf("additionalChildKinds[%d]", i), &sd.AdditionalChildKinds[i]); err != nil {
				return nil, err
			}
		}
		// The objects a definition reads besides the root (a TrainJob's
		// runtime): the pod-grouper watches them.
		refs, errs := definition.References(d)
		if len(errs) > 0 {
			return nil, fmt.Errorf("definition %s: %v", d.Name, errs.ToAggregate())
		}
		for _, r := range refs {
			for j, k := range r.Kinds {
				g := kartav1alpha1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
				if err := add(d.Name, fmt.Sprintf("references %s kinds[%d]", r.Name, j), &g); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, w := range wrappers {
		g := kartav1alpha1.GroupVersionKind{Group: w.GVK.Group, Version: w.GVK.Version, Kind: w.GVK.Kind}
		if err := add("wrappers/"+w.Name, "wrapper", &g); err != nil {
			return nil, err
		}
	}
	out := make([]Kind, 0, len(byGVK))
	for _, k := range byGVK {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GVK, out[j].GVK
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Version < b.Version
	})
	return out, nil
}

// Rules turns kinds into one rule per API group listing its resources
// (sorted, de-duplicated across versions), read verbs only; withheld
// resources are left out.
func Rules(kinds []Kind) []rbacv1.PolicyRule {
	byGroup := map[string]map[string]bool{}
	for _, k := range kinds {
		gr := k.Resource.GroupResource()
		if _, withheld := Withheld[gr]; withheld {
			continue
		}
		if byGroup[gr.Group] == nil {
			byGroup[gr.Group] = map[string]bool{}
		}
		byGroup[gr.Group][gr.Resource] = true
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	rules := make([]rbacv1.PolicyRule, 0, len(groups))
	for _, g := range groups {
		res := make([]string, 0, len(byGroup[g]))
		for r := range byGroup[g] {
			res = append(res, r)
		}
		sort.Strings(res)
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups: []string{g},
			Resources: res,
			Verbs:     append([]string(nil), ReadVerbs...),
		})
	}
	return rules
}

// CatalogReadRole is the generated ClusterRole for defs and wrappers.
func CatalogReadRole(defs []*kartav1alpha1.Karta, wrappers ...Wrapper) (*rbacv1.ClusterRole, []Kind, error) {
	kinds, err := Kinds(defs, wrappers...)
	if err != nil {
		return nil, nil, err
	}
	role := &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name: CatalogReadRoleName,
			Labels: map[string]string{
				"app.kubernetes.io/name":      "muster",
				"app.kubernetes.io/component": "podgrouper",
			},
		},
		Rules: Rules(kinds),
	}
	return role, kinds, nil
}

// Render writes the role as a commented YAML document: the header lists
// every kind with the definitions that name it, so a reviewer sees why each
// grant is there.
func Render(role *rbacv1.ClusterRole, kinds []Kind) ([]byte, error) {
	body, err := yaml.Marshal(role)
	if err != nil {
		return nil, err
	}
	// metav1.ObjectMeta marshals an empty creationTimestamp; drop it so the
	// file holds only what we set.
	body = bytes.ReplaceAll(body, []byte("  creationTimestamp: null\n"), nil)
	var b bytes.Buffer
	b.WriteString("# GENERATED by `make rbac` (go run ./hack/rbacgen/cmd/rbacgen) from the\n")
	b.WriteString("# embedded catalog (catalog/*.yaml, catalog/wrappers). DO NOT EDIT: change\n")
	b.WriteString("# the catalog and regenerate; a test fails when this file and the catalog\n")
	b.WriteString("# disagree.\n")
	b.WriteString("#\n")
	b.WriteString("# Read-only (get/list/watch) access for muster-podgrouper to every kind the\n")
	b.WriteString("# definitions name: root kinds (the workload objects it reads), child\n")
	b.WriteString("# component kinds (owners it walks through, metadata only),\n")
	b.WriteString("# additionalChildKinds and referenced kinds (objects a definition reads\n")
	b.WriteString("# besides the root), and the wrappers (catalog/wrappers: owners without a\n")
	b.WriteString("# definition the owner walk passes over). Resource names are the lowercased\n")
	b.WriteString("# plural of the kind.\n")
	b.WriteString("#\n")
	b.WriteString("# Withheld even though a definition lists them:\n")
	wh := make([]string, 0, len(Withheld))
	for gr, why := range Withheld {
		wh = append(wh, fmt.Sprintf("#   %s: %s\n", groupResourceString(gr), why))
	}
	sort.Strings(wh)
	for _, l := range wh {
		b.WriteString(l)
	}
	b.WriteString("#\n")
	b.WriteString("# Kinds (resource <- definitions):\n")
	for _, k := range kinds {
		defs := map[string]bool{}
		for _, s := range k.Sources {
			defs[s.Definition] = true
		}
		names := make([]string, 0, len(defs))
		for d := range defs {
			names = append(names, d)
		}
		sort.Strings(names)
		mark := ""
		if _, ok := Withheld[k.Resource.GroupResource()]; ok {
			mark = " (withheld)"
		}
		fmt.Fprintf(&b, "#   %s %s -> %s%s <- %s\n", gvString(k.GVK.GroupVersion()), k.GVK.Kind,
			groupResourceString(k.Resource.GroupResource()), mark, strings.Join(names, ", "))
	}
	b.Write(body)
	return b.Bytes(), nil
}

func gvString(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return gv.Version
	}
	return gv.String()
}

func groupResourceString(gr schema.GroupResource) string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}
