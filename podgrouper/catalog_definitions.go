package podgrouper

import (
	"context"
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/internal/crdschema"
)

// NewCatalogDefinitions adapts the catalog registry (embedded definitions
// plus cluster Kartas) to Definitions.
func NewCatalogDefinitions(r *catalog.Registry) Definitions {
	return catalogDefinitions{r: r, versionErrs: &sync.Map{}}
}

// NewCheckedCatalogDefinitions is NewCatalogDefinitions with the served
// schemas given to the registry: a kind at a version without a definition
// is read with another version's only when its schema has every field that
// one reads. Where it does not, the pods wait (Broken reports it), as for
// a broken definition: a definition that misreads the object must not
// size, or drop, a gang.
func NewCheckedCatalogDefinitions(ctx context.Context, r *catalog.Registry, c Clients) Definitions {
	r.SetSchemas(crdschema.Reader(ctx, c.Dynamic, c.Mapper))
	return NewCatalogDefinitions(r)
}

type catalogDefinitions struct {
	r *catalog.Registry
	// versionErrs keeps, per group/kind, the last lookup refused by the
	// version rule, for Broken to report (it is asked right after).
	versionErrs *sync.Map // schema.GroupKind → *catalog.VersionError
}

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
	e, err := d.r.Resolve(gvk)
	var verr *catalog.VersionError
	if errors.As(err, &verr) {
		d.versionErrs.Store(gvk.GroupKind(), verr)
		return nil, false
	}
	d.versionErrs.Delete(gvk.GroupKind())
	if err != nil || e == nil || e.Compiled == nil {
		return nil, false
	}
	return fromCatalog(e), true
}

// Broken finds a broken cluster definition for gk, or the definitions of
// other versions of gk the last lookup refused. The registry serves the
// embedded definition in place of a broken cluster one when there is one;
// Broken is only asked when LookupGVK found nothing.
func (d catalogDefinitions) Broken(gk schema.GroupKind) (*Entry, bool) {
	for _, e := range d.r.List() {
		if e.Err != nil && e.Origin == catalog.OriginCluster && e.GroupKind == gk {
			return fromCatalog(&e), true
		}
	}
	if v, ok := d.versionErrs.Load(gk); ok {
		verr := v.(*catalog.VersionError)
		out := &Entry{GroupKind: gk, Err: verr}
		if len(verr.Tried) > 0 {
			out.Name, out.Source = verr.Tried[0].Name, verr.Tried[0].Source
		}
		return out, true
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
