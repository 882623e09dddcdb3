package podgrouper

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
)

// NewCatalogDefinitions adapts the catalog registry (embedded definitions
// plus cluster Kartas) to Definitions.
func NewCatalogDefinitions(r *catalog.Registry) Definitions { return catalogDefinitions{r} }

type catalogDefinitions struct{ r *catalog.Registry }

func fromCatalog(e *catalog.Entry) *Entry {
	out := &Entry{Name: e.Name, Source: e.Source, GroupKind: e.GroupKind, Err: e.Err, ShadowedBy: e.ShadowedBy}
	if e.Compiled != nil {
		out.Grouper = e.Compiled
	}
	if e.LastGood != nil {
		out.LastGoodGeneration = e.LastGood.Generation
	}
	return out
}

func (d catalogDefinitions) LookupGVK(gvk schema.GroupVersionKind) (*Entry, bool) {
	e, ok := d.r.LookupGVK(gvk)
	if !ok || e.Compiled == nil {
		return nil, false
	}
	return fromCatalog(e), true
}

// Broken finds a broken cluster definition for gk. The registry serves the
// embedded definition in its place when there is one; Broken is only asked
// when LookupGVK found nothing.
func (d catalogDefinitions) Broken(gk schema.GroupKind) (*Entry, bool) {
	for _, e := range d.r.List() {
		if e.Err != nil && e.Origin == catalog.OriginCluster && e.GroupKind == gk {
			return fromCatalog(&e), true
		}
	}
	return nil, false
}

func (d catalogDefinitions) SetCluster(kartas []*kartav1alpha1.Karta) []Entry {
	entries := d.r.SetCluster(kartas)
	out := make([]Entry, len(entries))
	for i := range entries {
		out[i] = *fromCatalog(&entries[i])
	}
	return out
}

func (d catalogDefinitions) Generation() int64 { return d.r.Generation() }
