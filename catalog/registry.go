package catalog

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/definition/jq/schemacheck"
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
//   - A definition is written for one version of its kind (DynamoGraphDeployment
//     v1alpha1 and v1beta1 keep their pods in different fields). An object is
//     read with the definition of its own version; without one, with another
//     version's definition only when the schema the cluster serves for the
//     object's version has every field that definition reads (see Resolve).
//
// Registry is safe for concurrent use: readers see one immutable snapshot,
// and SetCluster swaps in a new one whole, so a lookup never sees half of an
// update.
type Registry struct {
	opts definition.Options

	mu   sync.RWMutex
	snap *snapshot
	// schemas gives the served schema of a kind at a version, for the
	// fallback check; nil when there is no cluster to ask.
	schemas SchemaFunc
}

// SchemaFunc returns the OpenAPI v3 schema the cluster serves for gvk, or
// nil and no error when it has none to give (a built-in kind, a CRD without
// a schema for that version).
type SchemaFunc func(gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error)

// snapshot is never modified after it is published.
type snapshot struct {
	generation int64
	embedded   []*Entry // sorted by name
	cluster    []*Entry // sorted by name, broken ones included
	byGK       map[schema.GroupKind]*Entry
	// byGVK is the entry serving each root group/version/kind; byKind the
	// entries of a group/kind, in fallback order (cluster first, then
	// embedded, each by name).
	byGVK  map[schema.GroupVersionKind]*Entry
	byKind map[schema.GroupKind][]*Entry
	byName map[string]*Entry
	// fallbacks memoises Resolve's schema checks for this snapshot.
	fallbacks sync.Map // schema.GroupVersionKind → fallbackResult
}

type fallbackResult struct {
	e   *Entry
	err error
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

// buildSnapshot indexes the entries. For one root group/version/kind a
// valid cluster entry wins over the embedded one; among several valid
// cluster entries for the same one the first by name wins, so the choice
// does not depend on the order the cluster listed them in. byGK (the
// version-less Lookup) is the first cluster entry of the kind, else the
// first embedded one, by name.
func buildSnapshot(gen int64, embedded, cluster []*Entry) *snapshot {
	s := &snapshot{
		generation: gen,
		embedded:   embedded,
		cluster:    cluster,
		byGK:       make(map[schema.GroupKind]*Entry, len(embedded)+len(cluster)),
		byGVK:      make(map[schema.GroupVersionKind]*Entry, len(embedded)+len(cluster)),
		byKind:     make(map[schema.GroupKind][]*Entry, len(embedded)+len(cluster)),
		byName:     make(map[string]*Entry, len(embedded)+len(cluster)),
	}
	for _, e := range embedded {
		gvk := e.GroupKind.WithVersion(e.Version)
		if _, taken := s.byGVK[gvk]; !taken {
			s.byGVK[gvk] = e
		}
		if _, taken := s.byGK[e.GroupKind]; !taken {
			s.byGK[e.GroupKind] = e
		}
		s.byName[e.Name] = e
	}
	winner := map[schema.GroupVersionKind]string{}
	var kindOrder []*Entry
	for _, e := range cluster { // sorted by name
		served := e.Serving()
		if served == nil {
			continue
		}
		gvk := served.GroupKind.WithVersion(served.Version)
		if w, taken := winner[gvk]; taken {
			e.ShadowedBy = w
		} else {
			s.byGVK[gvk] = served
			winner[gvk] = e.Name
			kindOrder = append(kindOrder, served)
		}
		s.byName[e.Name] = served
	}
	clusterGK := map[schema.GroupKind]bool{}
	for _, e := range kindOrder {
		if !clusterGK[e.GroupKind] {
			s.byGK[e.GroupKind] = e
			clusterGK[e.GroupKind] = true
		}
		s.byKind[e.GroupKind] = append(s.byKind[e.GroupKind], e)
	}
	for _, e := range embedded {
		s.byKind[e.GroupKind] = append(s.byKind[e.GroupKind], e)
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

// LookupGVK returns the definition serving gvk, as Resolve does; a kind at
// a version no definition fits is not found.
func (r *Registry) LookupGVK(gvk schema.GroupVersionKind) (*Entry, bool) {
	e, err := r.Resolve(gvk)
	return e, err == nil && e != nil
}

// ForKind returns the entries serving some version of gk, in the order
// Resolve falls back through them.
func (r *Registry) ForKind(gk schema.GroupKind) []*Entry {
	return slices.Clone(r.current().byKind[gk])
}

// ErrNoDefinition: no definition has the kind as its root, at any version.
var ErrNoDefinition = errors.New("no definition")

// VersionError says why no definition serves a kind at a version although
// definitions exist for other versions of it.
type VersionError struct {
	GVK schema.GroupVersionKind
	// Problems per definition tried: the fields it reads that the served
	// schema of GVK does not have.
	Problems map[string][]string
	// Tried are the definitions of other versions, in the order tried.
	Tried []*Entry
}

func (e *VersionError) Error() string {
	names := make([]string, 0, len(e.Problems))
	for n := range e.Problems {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		ps := e.Problems[n]
		more := ""
		if len(ps) > 3 {
			more = fmt.Sprintf(" and %d more", len(ps)-3)
			ps = ps[:3]
		}
		parts = append(parts, fmt.Sprintf("definition %s reads %s%s", n, strings.Join(ps, "; "), more))
	}
	return fmt.Sprintf("no definition for %s at version %s (group %q), and the served schema of %s lacks fields the definitions of its other versions read: %s; add a definition for %s",
		e.GVK.Kind, e.GVK.Version, e.GVK.Group, e.GVK.Version, strings.Join(parts, "; "), e.GVK.Version)
}

// SetSchemas gives the registry the served schemas to check a fallback
// against. Without it (no cluster at hand) a kind at a version without a
// definition is read with another version's definition unchecked.
func (r *Registry) SetSchemas(f SchemaFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.schemas = f
	r.snap = buildSnapshot(r.snap.generation, r.snap.embedded, r.snap.cluster)
}

// Resolve returns the definition serving gvk: the one written for that
// version (a cluster one before the embedded one), else the first one of
// another version (cluster before embedded, each by name) whose every
// root-object path exists in the schema the cluster serves for gvk. A
// definition checked against nothing reads fields that may have moved
// (DynamoGraphDeployment v1beta1 lists .spec.components where v1alpha1 has
// a .spec.services map), so one that does not fit is an error naming the
// fields, never a silent wrong answer. Without SetSchemas, or when the
// cluster has no schema for gvk, the first one is used unchecked. The
// result of a check is kept until the next SetCluster.
func (r *Registry) Resolve(gvk schema.GroupVersionKind) (*Entry, error) {
	r.mu.RLock()
	s, schemas := r.snap, r.schemas
	r.mu.RUnlock()
	if e, ok := s.byGVK[gvk]; ok {
		return e, nil
	}
	cands := s.byKind[gvk.GroupKind()]
	if len(cands) == 0 {
		return nil, ErrNoDefinition
	}
	if schemas == nil {
		return cands[0], nil
	}
	if v, ok := s.fallbacks.Load(gvk); ok {
		res := v.(fallbackResult)
		return res.e, res.err
	}
	e, err := fallback(gvk, cands, schemas)
	var verr *VersionError
	if err == nil || errors.As(err, &verr) {
		// Only a check's outcome is kept: a failed schema read is
		// tried again on the next lookup.
		s.fallbacks.Store(gvk, fallbackResult{e, err})
	}
	return e, err
}

func fallback(gvk schema.GroupVersionKind, cands []*Entry, schemas SchemaFunc) (*Entry, error) {
	sch, err := schemas(gvk)
	if err != nil {
		return nil, fmt.Errorf("read the served schema of %s %s: %w", gvk.Kind, gvk.Version, err)
	}
	if sch == nil {
		return cands[0], nil
	}
	verr := &VersionError{GVK: gvk, Problems: map[string][]string{}, Tried: cands}
	for _, c := range cands {
		var probs []string
		for _, p := range RootObjectPaths(c.Compiled.Definition()) {
			found, err := schemacheck.Check(p.Expr, sch)
			if err != nil {
				probs = append(probs, fmt.Sprintf("%s: %v", p.Field, err))
				continue
			}
			for _, pr := range found {
				probs = append(probs, pr.String())
			}
		}
		if len(probs) == 0 {
			return c, nil
		}
		verr.Problems[fmt.Sprintf("%s (%s)", c.Name, c.Version)] = probs
	}
	return nil, verr
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
