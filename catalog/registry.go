package catalog

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

// Origin says where a definition comes from.
type Origin string

// Origins of a definition.
const (
	OriginEmbedded Origin = "embedded"
	OriginCluster  Origin = "cluster"
)

// Entry is one definition known to the registry.
type Entry struct {
	// Name is the definition name (metadata.name).
	Name   string
	Origin Origin
	// Source is "catalog/<name>.yaml" for embedded definitions and
	// "karta/<name>" for cluster ones.
	Source string
	// GroupKind is the root component's kind; Version the root version as
	// written in the definition.
	GroupKind schema.GroupKind
	Version   string
	// Compiled is nil when Err is set.
	Compiled *definition.Compiled
	// Err is why the definition cannot be used. Only cluster definitions
	// carry one: a broken embedded definition fails NewRegistry.
	Err error

	// UID and Generation identify the Karta object a cluster entry was
	// compiled from (zero for embedded entries).
	UID        types.UID
	Generation int64
	// LastGood is set on a broken cluster entry whose Karta compiled
	// before: that earlier generation stays in force for its kind, so
	// editing a working Karta into a broken one never changes a gang.
	LastGood *Entry
	// ShadowedBy names the cluster definition that serves this entry's kind
	// instead of it (two Kartas for one kind: the first by name wins).
	ShadowedBy string
}

// Serving is the entry that serves e's kind on e's behalf: e itself when it
// compiled, its last good generation when it is broken, else nil.
func (e *Entry) Serving() *Entry {
	if e.Err == nil {
		return e
	}
	return e.LastGood
}

// Registry serves the embedded definitions merged with the cluster's Karta
// objects. The rules, in order:
//
//   - A cluster definition wins over an embedded one for the same root
//     group/kind.
//   - Among several cluster definitions for one kind, the first by name wins
//     (the others carry ShadowedBy), so the choice does not depend on the
//     order the cluster lists them in.
//   - A broken cluster definition is reported (List, SetCluster) but never
//     served: the last generation of the same Karta that compiled stays in
//     force (LastGood), else the embedded one.
//
// Registry is safe for concurrent use: readers see one immutable snapshot,
// and SetCluster swaps in a new one whole, so a lookup never sees half of an
// update.
type Registry struct {
	opts definition.Options

	mu   sync.RWMutex
	snap *snapshot
}

// snapshot is never modified after it is published.
type snapshot struct {
	generation int64
	embedded   []*Entry // sorted by name
	cluster    []*Entry // sorted by name, broken ones included
	byGK       map[schema.GroupKind]*Entry
	byName     map[string]*Entry
}

// NewRegistry compiles every embedded definition with opts. It fails only
// when an embedded definition is broken, which is a build defect.
func NewRegistry(opts definition.Options) (*Registry, error) {
	kartas, err := Embedded()
	if err != nil {
		return nil, err
	}
	embedded := make([]*Entry, 0, len(kartas))
	var errs []error
	for _, k := range kartas {
		e := compileEntry(k, OriginEmbedded, SourcePrefix+k.Name+".yaml", opts)
		if e.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Source, e.Err))
			continue
		}
		embedded = append(embedded, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &Registry{opts: opts}
	r.snap = buildSnapshot(1, embedded, nil)
	return r, nil
}

// compileEntry turns one Karta into an Entry, recording any problem in Err.
func compileEntry(k *kartav1alpha1.Karta, origin Origin, source string, opts definition.Options) *Entry {
	e := &Entry{Origin: origin, Source: source}
	if k == nil {
		e.Err = errors.New("definition is nil")
		return e
	}
	e.Name = k.Name
	e.UID, e.Generation = k.UID, k.Generation
	if root := k.Spec.StructureDefinition.RootComponent.Kind; root != nil {
		e.GroupKind = schema.GroupKind{Group: root.Group, Kind: root.Kind}
		e.Version = root.Version
	}
	c, err := definition.Compile(k, opts)
	if err != nil {
		e.Err = err
		return e
	}
	if e.GroupKind.Kind == "" {
		// Compile validates the root kind; this guards a registry keyed by it.
		e.Err = errors.New("spec.structureDefinition.rootComponent.kind: required")
		return e
	}
	e.Compiled = c
	return e
}

// buildSnapshot indexes the entries. For one root group/kind a valid cluster
// entry wins over the embedded one; among several valid cluster entries for
// the same kind the first by name wins, so the choice does not depend on the
// order the cluster listed them in.
func buildSnapshot(gen int64, embedded, cluster []*Entry) *snapshot {
	s := &snapshot{
		generation: gen,
		embedded:   embedded,
		cluster:    cluster,
		byGK:       make(map[schema.GroupKind]*Entry, len(embedded)+len(cluster)),
		byName:     make(map[string]*Entry, len(embedded)+len(cluster)),
	}
	for _, e := range embedded {
		s.byGK[e.GroupKind] = e
		s.byName[e.Name] = e
	}
	winner := map[schema.GroupKind]string{}
	for _, e := range cluster { // sorted by name
		served := e.Serving()
		if served == nil {
			continue
		}
		if w, taken := winner[served.GroupKind]; taken {
			e.ShadowedBy = w
		} else {
			s.byGK[served.GroupKind] = served
			winner[served.GroupKind] = e.Name
		}
		s.byName[e.Name] = served
	}
	return s
}

func (r *Registry) current() *snapshot {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.snap
}

// Lookup returns the definition serving root kind gk.
func (r *Registry) Lookup(gk schema.GroupKind) (*Entry, bool) {
	e, ok := r.current().byGK[gk]
	return e, ok
}

// LookupGVK returns the definition serving gvk's group and kind. A
// definition is written against one version but its paths hold for every
// version the CRD serves with the same schema, and the API server converts
// between them, so the version does not take part in the match.
func (r *Registry) LookupGVK(gvk schema.GroupVersionKind) (*Entry, bool) {
	return r.Lookup(gvk.GroupKind())
}

// Get returns the definition served under name: the valid cluster
// definition of that name, else the embedded one.
func (r *Registry) Get(name string) (*Entry, bool) {
	e, ok := r.current().byName[name]
	return e, ok
}

// List returns every entry sorted by name, embedded before cluster for the
// same name, broken cluster entries included.
func (r *Registry) List() []Entry {
	s := r.current()
	out := make([]Entry, 0, len(s.embedded)+len(s.cluster))
	for _, e := range s.embedded {
		out = append(out, *e)
	}
	for _, e := range s.cluster {
		out = append(out, *e)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Origin == OriginEmbedded && out[j].Origin != OriginEmbedded
	})
	return out
}

// SetCluster replaces the whole set of cluster definitions with kartas and
// returns their entries sorted by name, Err set on the broken ones. Each
// Karta is compiled on its own, so a broken one never affects the others.
// Compilation happens before the lock is taken; readers keep the previous
// snapshot until the new one is complete.
func (r *Registry) SetCluster(kartas []*kartav1alpha1.Karta) []Entry {
	cluster := make([]*Entry, 0, len(kartas))
	for _, k := range kartas {
		name := ""
		if k != nil {
			name = k.Name
		}
		cluster = append(cluster, compileEntry(k, OriginCluster, "karta/"+name, r.opts))
	}
	sort.SliceStable(cluster, func(i, j int) bool { return cluster[i].Name < cluster[j].Name })

	r.mu.Lock()
	defer r.mu.Unlock()
	// The previous snapshot's entries are read under the write lock so two
	// SetCluster calls cannot both build on the same predecessor.
	prev := map[string]*Entry{}
	for _, e := range r.snap.cluster {
		prev[e.Name] = e
	}
	for _, e := range cluster {
		p, ok := prev[e.Name]
		if e.Err == nil || !ok || p.UID != e.UID {
			// A Karta deleted and created anew is a new object: nothing
			// of the old one is kept.
			continue
		}
		e.LastGood = p.Serving()
	}
	r.snap = buildSnapshot(r.snap.generation+1, r.snap.embedded, cluster)

	out := make([]Entry, len(cluster))
	for i, e := range cluster {
		out[i] = *e
	}
	return out
}

// Generation increases with every SetCluster, so callers can tell that what
// they computed from an earlier lookup may be stale.
func (r *Registry) Generation() int64 {
	return r.current().generation
}
