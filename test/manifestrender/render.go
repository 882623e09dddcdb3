// Package manifestrender renders muster's install manifests the two ways a
// user installs them — `kubectl apply -k manifests/` (kustomize) and the Helm
// chart in manifests/helm/muster — into objects, so tests can apply them to
// a real apiserver and compare one with the other. Nothing here talks to a
// cluster. Only tests import it: it pulls in Helm and kustomize, which no
// muster binary needs.
package manifestrender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/muster-io/muster/internal/yamldoc"
)

// Namespace is where muster runs.
const Namespace = "muster-system"

// KubeVersion is the Kubernetes version charts are rendered for.
const KubeVersion = "v1.37.2"

// ReleaseName is the Helm release name the chart's defaults are written for.
const ReleaseName = "muster"

// Kustomize builds the kustomization in dir (as `kubectl apply -k dir` would)
// and returns its objects in output order.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return Decode(out)
}

// KustomizeComponents builds base with the given kustomize Components, the
// way a user's own kustomization in workDir does (manifests/README.md,
// "Installing native mode"): kustomize loads no overlay from inside the
// directory it builds, so optional parts of manifests/ are Components that a
// kustomization elsewhere adds. It writes workDir/kustomization.yaml, naming
// base and components by paths relative to workDir (kustomize refuses
// absolute ones).
func KustomizeComponents(workDir, base string, components ...string) ([]*unstructured.Unstructured, error) {
	workDir, err := filepath.Abs(workDir)
	if err != nil {
		return nil, err
	}
	rel := func(p string) (string, error) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		return filepath.Rel(workDir, abs)
	}
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	r, err := rel(base)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "- %s\ncomponents:\n", r)
	for _, c := range components {
		r, err := rel(c)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "- %s\n", r)
	}
	if err := os.WriteFile(filepath.Join(workDir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return Kustomize(workDir)
}

// Helm renders the chart in chartDir client-side (as `helm template
// --include-crds` would) with the given values over the chart's defaults,
// as release ReleaseName in Namespace. CRDs from the chart's crds/ come
// first, as Helm installs them.
func Helm(chartDir string, values map[string]any) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("helm chart %s: %w", chartDir, err)
	}
	cfg := &action.Configuration{}
	inst := action.NewInstall(cfg)
	inst.ClientOnly = true
	inst.DryRun = true
	inst.Replace = true
	inst.IncludeCRDs = true
	inst.ReleaseName = ReleaseName
	inst.Namespace = Namespace
	// Helm's client-only default is an old Kubernetes; render for the one
	// muster is built against, so the chart's kubeVersion constraint holds.
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	inst.KubeVersion = kv
	if values == nil {
		values = map[string]any{}
	}
	rel, err := inst.Run(chrt, values)
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chartDir, err)
	}
	return Decode([]byte(rel.Manifest))
}

// Decode splits a multi-document YAML stream into objects, dropping empty
// documents. A document without apiVersion or kind is an error.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := yamldoc.Split(data, false)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, d := range docs {
		if string(bytes.TrimSpace(d.JSON)) == "{}" {
			continue // a template that rendered to nothing but a separator
		}
		obj := &unstructured.Unstructured{}
		if err := json.Unmarshal(d.JSON, &obj.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", d.N, err)
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
			return nil, fmt.Errorf("document %d (%q): apiVersion and kind are required", d.N, obj.GetName())
		}
		out = append(out, obj)
	}
	return out, nil
}

// Key identifies an object: kind, namespace and name.
func Key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s/%s/%s", o.GroupVersionKind().Group, o.GetKind(), o.GetNamespace(), o.GetName())
}

// ByKey indexes objects by Key; a duplicate is an error.
func ByKey(objs []*unstructured.Unstructured) (map[string]*unstructured.Unstructured, error) {
	m := make(map[string]*unstructured.Unstructured, len(objs))
	for _, o := range objs {
		k := Key(o)
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%s appears twice", k)
		}
		m[k] = o
	}
	return m, nil
}

// Keys returns the sorted keys of objs.
func Keys(objs []*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		keys = append(keys, Key(o))
	}
	sort.Strings(keys)
	return keys
}

// InstallOrder sorts objects the way they must reach an apiserver: CRDs,
// namespaces, service accounts and RBAC, then the rest (stable within each
// class).
func InstallOrder(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			return 0
		case "Namespace":
			return 1
		case "ServiceAccount", "Secret", "ConfigMap":
			return 2
		case "ClusterRole", "Role":
			return 3
		case "ClusterRoleBinding", "RoleBinding":
			return 4
		}
		return 5
	}
	out := append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}
