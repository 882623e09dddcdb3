package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/internal/crdschema"
)

// kartaGK is the kind of cluster definitions.
var kartaGK = schema.GroupKind{Group: kartav1alpha1.Group, Kind: kartav1alpha1.Kind}

// legacyGK is the deprecated kind of cluster definitions, read as Karta.
var legacyGK = schema.GroupKind{Group: kartav1alpha1.LegacyGroup, Kind: kartav1alpha1.LegacyKind}

// definitions is the registry of one command run: the embedded catalog plus,
// when a cluster is at hand and serves Kartas, the cluster's definitions.
type definitions struct {
	reg *catalog.Registry
	// cluster keeps the cluster's Kartas by name, also the broken ones the
	// registry holds without a compiled form, so they can still be shown.
	cluster map[string]*kartav1alpha1.Karta
	// embedded keeps the embedded Kartas by name.
	embedded map[string]*kartav1alpha1.Karta
}

func (e *Env) definitionOptions() definition.Options {
	opts := definition.Options{}
	for _, r := range e.GPUResources {
		opts.GPUResourceNames = append(opts.GPUResourceNames, corev1.ResourceName(r))
	}
	return opts
}

func (e *Env) gpuNames() []corev1.ResourceName {
	if o := e.definitionOptions(); len(o.GPUResourceNames) > 0 {
		return o.GPUResourceNames
	}
	return definition.DefaultGPUResourceNames
}

// loadDefinitions builds the registry; with a cluster it adds the cluster's
// Kartas when the cluster serves them. A cluster that does not serve
// Kartas is normal (muster's CRD not installed); a failed list is a
// warning, not an error, since the embedded catalog still answers.
func (e *Env) loadDefinitions(ctx context.Context, c *Cluster) (*definitions, error) {
	reg, err := catalog.NewRegistry(e.definitionOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	d := &definitions{reg: reg, cluster: map[string]*kartav1alpha1.Karta{}, embedded: map[string]*kartav1alpha1.Karta{}}
	if emb, err := catalog.Embedded(); err == nil {
		for _, k := range emb {
			d.embedded[k.Name] = k
		}
	}
	if c == nil {
		return d, nil
	}
	reg.SetSchemas(crdschema.Reader(ctx, c.Dynamic, c.Mapper))
	kartas, err := e.listClusterKartas(ctx, c, kartaGK)
	if err != nil {
		return nil, err
	}
	legacy, err := e.listClusterKartas(ctx, c, legacyGK)
	if err != nil {
		return nil, err
	}
	for _, k := range kartas {
		d.cluster[k.Name] = k
	}
	for _, k := range legacy {
		if _, dup := d.cluster[k.Name]; dup {
			e.warnf("cluster definition %s is both a %s and a %s; the %s is used", k.Name, kartav1alpha1.Kind, kartav1alpha1.LegacyKind, kartav1alpha1.Kind)
			continue
		}
		e.warnf("cluster %s", definition.LegacyNotice(k.Name))
		d.cluster[k.Name] = k
		kartas = append(kartas, k)
	}
	for _, ent := range reg.SetCluster(kartas) {
		if ent.Err != nil {
			e.warnf("cluster definition %s is invalid and ignored: %v", ent.Name, ent.Err)
		}
	}
	return d, nil
}

// listClusterKartas lists the cluster's definitions of kind gk (Karta, or
// the deprecated ResourceInterface read as one). Not served is no error.
func (e *Env) listClusterKartas(ctx context.Context, c *Cluster, gk schema.GroupKind) ([]*kartav1alpha1.Karta, error) {
	m, err := c.Mapper.RESTMapping(gk)
	if err != nil {
		if isUnreachable(err) {
			return nil, apiError("discover the cluster's definitions", err)
		}
		return nil, nil // the cluster does not serve this kind
	}
	list, err := c.Dynamic.Resource(m.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		if isUnreachable(err) {
			return nil, apiError("list cluster definitions", err)
		}
		e.warnf("cannot read cluster definitions of kind %s (%v); using the embedded catalog only", gk.Kind, err)
		return nil, nil
	}
	var kartas []*kartav1alpha1.Karta
	for i := range list.Items {
		k := &kartav1alpha1.Karta{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, k); err != nil {
			e.warnf("cluster definition %s cannot be read: %v", list.Items[i].GetName(), err)
			continue
		}
		kartas = append(kartas, k)
	}
	return kartas, nil
}

// karta returns the definition behind an entry, also for broken ones.
func (d *definitions) karta(ent *catalog.Entry) *kartav1alpha1.Karta {
	if ent.Compiled != nil {
		return ent.Compiled.Definition()
	}
	if ent.Origin == catalog.Origin("cluster") {
		return d.cluster[ent.Name]
	}
	return d.embedded[ent.Name]
}

// forGVK finds the definition of a kind, or a no-definition error that
// lists what is defined.
func (d *definitions) forGVK(gvk schema.GroupVersionKind) (*catalog.Entry, error) {
	ent, err := d.reg.Resolve(gvk)
	if err == nil && ent.Compiled != nil {
		return ent, nil
	}
	var verr *catalog.VersionError
	if errors.As(err, &verr) {
		return nil, &ExitError{Code: ExitNoDefinition, Err: &noDefinitionError{kind: gvk.Kind, group: gvk.Group, msg: verr.Error()}}
	}
	if err != nil && !errors.Is(err, catalog.ErrNoDefinition) {
		return nil, err
	}
	return nil, &ExitError{Code: ExitNoDefinition, Err: &noDefinitionError{kind: gvk.Kind, group: gvk.Group,
		msg: fmt.Sprintf("no definition for %s (group %q): muster knows %s; add one as a Karta (see \"muster definitions\" and \"muster validate\")",
			gvk.Kind, gvk.Group, strings.Join(d.kindNames(), ", "))}}
}

// kindNames lists the defined root kinds as kind.group, sorted.
func (d *definitions) kindNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, ent := range d.reg.List() {
		if ent.Err != nil {
			continue
		}
		n := strings.ToLower(ent.GroupKind.Kind)
		if ent.GroupKind.Group != "" {
			n += "." + ent.GroupKind.Group
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// typeCandidates lists every spelling of every defined kind a person may
// type: kind, kind.group, and when the cluster serves it, plural, singular
// and short names. Completion and "did you mean" use it.
func (d *definitions) typeCandidates(mapper meta.RESTMapper, shortNames map[schema.GroupResource][]string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, ent := range d.reg.List() {
		if ent.Err != nil {
			continue
		}
		kind := strings.ToLower(ent.GroupKind.Kind)
		add(kind)
		if ent.GroupKind.Group != "" {
			add(kind + "." + ent.GroupKind.Group)
		}
		if mapper == nil {
			continue
		}
		if m, ok := served(mapper, ent.GroupKind, ent.Version); ok {
			add(m.Resource.Resource)
			for _, s := range shortNames[m.Resource.GroupResource()] {
				add(s)
			}
		}
	}
	sort.Strings(out)
	return out
}

// entryGroupKindString renders group/version/kind for tables.
func gvkString(gk schema.GroupKind, version string) string {
	if gk.Group == "" {
		return version + "/" + gk.Kind
	}
	return gk.Group + "/" + version + "/" + gk.Kind
}

// pendingDefinitions is the definition loading of one describe, started
// ahead so that decoding the embedded catalog (CPU) and listing the
// cluster's Kartas (a request) run while the command resolves the type and
// fetches the workload.
type pendingDefinitions struct {
	env  *Env
	done chan struct{}

	embedded    []*kartav1alpha1.Karta
	embeddedErr error

	cluster  []*kartav1alpha1.Karta // nil when the cluster serves no Kartas
	served   bool                   // the cluster serves Kartas
	warnings []string               // to print, in order, when waited for
	err      error

	// schemas reads served schemas for the version fallback; nil offline.
	schemas catalog.SchemaFunc
}

// startDefinitions begins loading what loadDefinitions loads, without
// compiling anything; kindDefinitions.forGVK then compiles only the
// definition it returns. Compiling the whole catalog costs about twenty
// times one definition, and a describe needs one.
func (e *Env) startDefinitions(ctx context.Context, c *Cluster) *pendingDefinitions {
	p := &pendingDefinitions{env: e, done: make(chan struct{})}
	if c != nil {
		p.schemas = crdschema.Reader(ctx, c.Dynamic, c.Mapper)
	}
	embDone := make(chan struct{})
	go func() {
		defer close(embDone)
		p.embedded, p.embeddedErr = catalog.Embedded()
	}()
	go func() {
		defer close(p.done)
		p.listCluster(ctx, c)
		<-embDone
	}()
	return p
}

// listCluster reads the cluster's Kartas, and the deprecated
// ResourceInterfaces read as Kartas, as loadDefinitions does.
func (p *pendingDefinitions) listCluster(ctx context.Context, c *Cluster) {
	if c == nil {
		return
	}
	names := map[string]bool{}
	for _, gk := range []schema.GroupKind{kartaGK, legacyGK} {
		m, err := c.Mapper.RESTMapping(gk)
		if err != nil {
			if isUnreachable(err) {
				p.err = apiError("discover the cluster's definitions", err)
				return
			}
			continue // the cluster does not serve this kind
		}
		list, err := c.Dynamic.Resource(m.Resource).List(ctx, metav1.ListOptions{})
		if err != nil {
			if isUnreachable(err) {
				p.err = apiError("list cluster definitions", err)
				return
			}
			p.warnings = append(p.warnings, fmt.Sprintf("cannot read cluster definitions of kind %s (%v); using the embedded catalog only", gk.Kind, err))
			continue
		}
		p.served = true
		for i := range list.Items {
			k := &kartav1alpha1.Karta{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, k); err != nil {
				p.warnings = append(p.warnings, fmt.Sprintf("cluster definition %s cannot be read: %v", list.Items[i].GetName(), err))
				continue
			}
			if gk == legacyGK {
				if names[k.Name] {
					p.warnings = append(p.warnings, fmt.Sprintf("cluster definition %s is both a %s and a %s; the %s is used", k.Name, kartav1alpha1.Kind, kartav1alpha1.LegacyKind, kartav1alpha1.Kind))
					continue
				}
				p.warnings = append(p.warnings, "cluster "+definition.LegacyNotice(k.Name))
			}
			names[k.Name] = true
			p.cluster = append(p.cluster, k)
		}
	}
}

// kindDefinitions are the decoded definitions of one run, the cluster's
// compiled (they are few, and a broken one is worth a warning), the
// embedded ones compiled on demand.
type kindDefinitions struct {
	env      *Env
	embedded []*kartav1alpha1.Karta // sorted by name
	// cluster are the cluster's Kartas and their entries, sorted by name
	// (Err set on the broken ones), as Registry.SetCluster returns them.
	cluster  []*kartav1alpha1.Karta
	clusterE []catalog.Entry
	served   bool
	schemas  catalog.SchemaFunc
}

// wait returns the loaded definitions and prints the warnings
// loadDefinitions would have printed, in the same order.
func (p *pendingDefinitions) wait() (*kindDefinitions, error) {
	<-p.done
	if p.embeddedErr != nil {
		return nil, fmt.Errorf("embedded catalog: %w", p.embeddedErr)
	}
	if p.err != nil {
		return nil, p.err
	}
	for _, w := range p.warnings {
		p.env.warnf("%s", w)
	}
	kd := &kindDefinitions{env: p.env, embedded: p.embedded, cluster: p.cluster, served: p.served, schemas: p.schemas}
	opts := p.env.definitionOptions()
	for _, k := range p.cluster {
		ent := catalog.Entry{Name: k.Name, Origin: catalog.OriginCluster, Source: "karta/" + k.Name}
		if root := k.Spec.StructureDefinition.RootComponent.Kind; root != nil {
			ent.GroupKind = schema.GroupKind{Group: root.Group, Kind: root.Kind}
			ent.Version = root.Version
		}
		ent.Compiled, ent.Err = definition.Compile(k, opts)
		if ent.Err == nil && ent.GroupKind.Kind == "" {
			ent.Compiled, ent.Err = nil, fmt.Errorf("spec.structureDefinition.rootComponent.kind: required")
		}
		kd.clusterE = append(kd.clusterE, ent)
	}
	sort.SliceStable(kd.clusterE, func(i, j int) bool { return kd.clusterE[i].Name < kd.clusterE[j].Name })
	for _, ent := range kd.clusterE {
		if ent.Err != nil {
			p.env.warnf("cluster definition %s is invalid and ignored: %v", ent.Name, ent.Err)
		}
	}
	return kd, nil
}

// forGVK returns the definition in force for gvk, with the registry's
// precedence: a definition of that version (the first valid cluster one by
// name, else the first embedded one), of which only that one is compiled;
// else the registry's fallback to another version, and its error when
// there is none.
func (kd *kindDefinitions) forGVK(gvk schema.GroupVersionKind) (*catalog.Entry, error) {
	gk := gvk.GroupKind()
	for i := range kd.clusterE {
		if ent := &kd.clusterE[i]; ent.Err == nil && ent.GroupKind == gk && ent.Version == gvk.Version {
			return ent, nil
		}
	}
	// The registry serves the first embedded definition by name of a
	// group/version/kind.
	for _, k := range kd.embedded {
		root := k.Spec.StructureDefinition.RootComponent.Kind
		if root == nil || root.Group != gk.Group || root.Kind != gk.Kind || root.Version != gvk.Version {
			continue
		}
		source := catalog.SourcePrefix + k.Name + ".yaml"
		c, err := definition.Compile(k, kd.env.definitionOptions())
		if err != nil {
			return nil, fmt.Errorf("embedded catalog: %s: %w", source, err)
		}
		return &catalog.Entry{Name: k.Name, Origin: catalog.OriginEmbedded, Source: source, GroupKind: gk, Version: root.Version, Compiled: c}, nil
	}
	// No definition of that version: the registry's fallback rule, which
	// may read the served schema.
	full, err := kd.full()
	if err != nil {
		return nil, err
	}
	return full.forGVK(gvk)
}

// full builds the whole registry, for the error paths that list every
// definition (no definition for a kind, an unknown type).
func (kd *kindDefinitions) full() (*definitions, error) {
	reg, err := catalog.NewRegistry(kd.env.definitionOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	d := &definitions{reg: reg, cluster: map[string]*kartav1alpha1.Karta{}, embedded: map[string]*kartav1alpha1.Karta{}}
	for _, k := range kd.embedded {
		d.embedded[k.Name] = k
	}
	if kd.schemas != nil {
		reg.SetSchemas(kd.schemas)
	}
	if kd.served {
		for _, k := range kd.cluster {
			d.cluster[k.Name] = k
		}
		reg.SetCluster(kd.cluster)
	}
	return d, nil
}

// childKinds are the kinds of a definition's child components other than
// pods: the owners a pod's chain can pass through on its way to the root.
func childKinds(k *kartav1alpha1.Karta) []schema.GroupVersionKind {
	if k == nil {
		return nil
	}
	var out []schema.GroupVersionKind
	seen := map[schema.GroupKind]bool{}
	for _, cd := range k.Spec.StructureDefinition.ChildComponents {
		if cd.Kind == nil || (cd.Kind.Group == "" && cd.Kind.Kind == "Pod") {
			continue
		}
		gvk := schema.GroupVersionKind{Group: cd.Kind.Group, Version: cd.Kind.Version, Kind: cd.Kind.Kind}
		if !seen[gvk.GroupKind()] {
			seen[gvk.GroupKind()] = true
			out = append(out, gvk)
		}
	}
	return out
}
