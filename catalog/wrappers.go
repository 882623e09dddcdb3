package catalog

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

// wrapperFiles holds the wrappers, one per file (wrappers/<name>.yaml).
//
//go:embed wrappers/*.yaml
var wrapperFiles embed.FS

// Wrapper is a kind that owns workloads but deliberately has no definition:
// the pod-grouper passes over it to the top-most owner below it that has
// one, so the wrapped workload keeps its own kind's gang. Its file says
// why; the generated docs list it and the generated read role grants it,
// since the owner walk must read it to pass over it.
type Wrapper struct {
	// Name is the file name without .yaml.
	Name string                         `json:"-"`
	Kind kartav1alpha1.GroupVersionKind `json:"kind"`
	// Why says why the kind has no definition, for the docs.
	Why string `json:"why"`
}

// Wrappers decodes every embedded wrapper, sorted by name. An error names
// the file.
func Wrappers() ([]Wrapper, error) {
	names, err := fs.Glob(wrapperFiles, "wrappers/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Wrapper, 0, len(names))
	for _, name := range names {
		data, err := wrapperFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", SourcePrefix, name, err)
		}
		var w Wrapper
		if err := yaml.UnmarshalStrict(data, &w); err != nil {
			return nil, fmt.Errorf("%s%s: %w", SourcePrefix, name, err)
		}
		w.Name = strings.TrimSuffix(path.Base(name), ".yaml")
		switch {
		case w.Kind.Version == "" || w.Kind.Kind == "":
			return nil, fmt.Errorf("%s%s: kind needs version and kind", SourcePrefix, name)
		case strings.TrimSpace(w.Why) == "":
			return nil, fmt.Errorf("%s%s: why is missing", SourcePrefix, name)
		}
		out = append(out, w)
	}
	return out, nil
}
