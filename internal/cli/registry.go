package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
)

// kartaGK is the kind of cluster definitions.
var kartaGK = schema.GroupKind{Group: definition.Group, Kind: definition.Kind}

// definitions is the registry of one command run: the embedded catalog plus,
// when a cluster is at hand and serves Kartas, the cluster's definitions.
type definitions struct {
	reg *catalog.Registry
	// cluster keeps the cluster's Kartas by name, also the broken ones the
	// registry holds without a compiled form, so they can still be shown.
	cluster map[string]*definition.Karta
	// embedded keeps the embedded Kartas by name.
	embedded map[string]*definition.Karta
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
	d := &definitions{reg: reg, cluster: map[string]*definition.Karta{}, embedded: map[string]*definition.Karta{}}
	if emb, err := catalog.Embedded(); err == nil {
		for _, k := range emb {
			d.embedded[k.Name] = k
		}
	}
	if c == nil {
		return d, nil
	}
	m, err := c.Mapper.RESTMapping(kartaGK)
	if err != nil {
		if isUnreachable(err) {
			return nil, apiError("discover the cluster's definitions", err)
		}
		return d, nil // the cluster does not serve Kartas
	}
	list, err := c.Dynamic.Resource(m.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		if isUnreachable(err) {
			return nil, apiError("list cluster definitions", err)
		}
		e.warnf("cannot read cluster definitions (%v); using the embedded catalog only", err)
		return d, nil
	}
	var kartas []*definition.Karta
	for i := range list.Items {
		k := &definition.Karta{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, k); err != nil {
			e.warnf("cluster definition %s cannot be read: %v", list.Items[i].GetName(), err)
			continue
		}
		kartas = append(kartas, k)
		d.cluster[k.Name] = k
	}
	for _, ent := range reg.SetCluster(kartas) {
		if ent.Err != nil {
			e.warnf("cluster definition %s is invalid and ignored: %v", ent.Name, ent.Err)
		}
	}
	return d, nil
}

// karta returns the definition behind an entry, also for broken ones.
func (d *definitions) karta(ent *catalog.Entry) *definition.Karta {
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
	if ent, ok := d.reg.LookupGVK(gvk); ok && ent.Compiled != nil {
		return ent, nil
	}
	return nil, noDefinitionErrorf("no definition for %s (group %q): muster knows %s; add one as a Karta (see \"muster definitions\" and \"muster validate\")",
		gvk.Kind, gvk.Group, strings.Join(d.kindNames(), ", "))
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
