package podgrouper

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

// Grouper is what the pod-grouper needs from a compiled definition;
// *definition.Compiled implements it.
type Grouper interface {
	Definition() *kartav1alpha1.Karta
	GangForPod(ctx context.Context, root *unstructured.Unstructured, pod *corev1.Pod) (*definition.Gang, error)
}

var _ Grouper = (*definition.Compiled)(nil)

// Entry is one definition known to the pod-grouper: valid (Grouper set) or
// broken (Err set).
type Entry struct {
	// Name is the definition name (metadata.name of the Karta).
	Name string
	// Source says where it comes from ("catalog/jobset.yaml", "karta/<name>").
	Source string
	// GroupKind is the root kind.
	GroupKind schema.GroupKind
	// Grouper is nil when Err is set.
	Grouper Grouper
	Err     error
	// LastGoodGeneration, on a broken cluster definition, is the earlier
	// generation of the same Karta still in use for its kind (0: none, the
	// embedded definition or nothing serves the kind).
	LastGoodGeneration int64
	// ShadowedBy names the cluster definition that serves this one's kind
	// instead of it.
	ShadowedBy string
}

// Definitions is the registry of workload definitions: the embedded catalog
// merged with the cluster's Karta objects. Implementations are safe for
// concurrent use. NewCatalogDefinitions adapts a *catalog.Registry.
type Definitions interface {
	// LookupGVK returns the valid definition whose root kind has gvk's group
	// and kind; a cluster definition wins over an embedded one.
	LookupGVK(gvk schema.GroupVersionKind) (*Entry, bool)
	// Broken returns a broken cluster definition for gk, if there is one.
	Broken(gk schema.GroupKind) (*Entry, bool)
	// SetCluster replaces the cluster definitions atomically and returns
	// one entry per Karta, Err set on the broken ones.
	SetCluster(kartas []*kartav1alpha1.Karta) []Entry
	// Generation changes whenever the set of definitions changes.
	Generation() int64
}
