package catalog

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

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
}

// Registry serves the embedded definitions merged with the cluster's Karta
// objects. A cluster definition wins over an embedded one for the same root
// group/kind; a broken cluster definition is reported (List, SetCluster) but
// never served, so the embedded one stays in force.
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
	overridden := map[schema.GroupKind]bool{}
	for _, e := range cluster { // sorted by name
		if e.Err != nil {
			continue
		}
		if !overridden[e.GroupKind] {
			s.byGK[e.GroupKind] = e
			overridden[e.GroupKind] = true
		}
		s.byName[e.Name] = e
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
	r.snap = buildSnapshot(r.snap.generation+1, r.snap.embedded, cluster)
	r.mu.Unlock()

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
