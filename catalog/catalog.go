// Package catalog holds muster's knowledge of workload types as data: one
// workload definition (a Karta) per type, embedded in the binary, and a
// Registry that serves them merged with the definitions found in the cluster.
//
// Every definition file starts with a comment that says what the operator
// creates, which gang granularity was chosen and why, the min-member rule and
// where GPUs come from; catalog/README.md is generated from the summary
// annotations of each file (make catalog-docs).
package catalog

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

// files holds the definitions, one per file; the file name (without .yaml)
// is the definition name.
//
//go:embed *.yaml
var files embed.FS

// Summary annotations every embedded definition carries in metadata; the
// docs generator renders them and a test keeps them present.
const (
	AnnotationGangGranularity = "muster.io/gang-granularity"
	AnnotationMinMemberRule   = "muster.io/min-member-rule"
	AnnotationGPUSource       = "muster.io/gpu-source"
	// AnnotationKAIGrouper, optional, says how KAI Scheduler's pod-grouper
	// sizes the kind's gang and where and why muster differs; the docs
	// render it in a table of its own.
	AnnotationKAIGrouper = "muster.io/kai-grouper"
)

// SourcePrefix is prepended to an embedded file name to form Entry.Source.
const SourcePrefix = "catalog/"

// Embedded decodes every embedded definition, sorted by name. An error names
// the file; it means the binary was built from a broken catalog.
func Embedded() ([]*kartav1alpha1.Karta, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]*kartav1alpha1.Karta, 0, len(names))
	for _, name := range names {
		k, err := decodeFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// EmbeddedFile returns the raw bytes of one embedded definition file.
func EmbeddedFile(name string) ([]byte, error) {
	return files.ReadFile(name + ".yaml")
}

func decodeFile(file string) (*kartav1alpha1.Karta, error) {
	data, err := files.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", SourcePrefix, file, err)
	}
	k, err := definition.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", SourcePrefix, file, err)
	}
	// The file name is the definition name so that a reader finds one from
	// the other; a mismatch is a packaging mistake worth failing on.
	if want := strings.TrimSuffix(path.Base(file), ".yaml"); k.Name != want {
		return nil, fmt.Errorf("%s%s: metadata.name is %q, want %q (the file name)", SourcePrefix, file, k.Name, want)
	}
	return k, nil
}
