package definition

import (
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

// gangDef is one compiled gang definition: a podGroups entry or the
// podGroup tree.
type gangDef struct {
	name    string
	members []memberDef
	// memberNames are the member component names, for Gang.Members.
	memberNames []string
	// counted are the components whose pods the gang counts: each member,
	// or its pod-bearing descendants when the member has no pods itself.
	counted []int
	// grouped is true when a member has groupByKeyPaths; the gang instance
	// is then one replica of the scope component.
	grouped bool
	scope   int
	// sizeMember is the only member when it has no pods of its own and
	// reads its own replica count, which is then the size of one gang
	// instance; -1 otherwise.
	sizeMember                          int
	topologyRequired, topologyPreferred string
}

type memberDef struct {
	comp    int
	groupBy []*expr
	filters []*expr
}

// gangScheduling checks and compiles optimizationInstructions.gangScheduling:
// the older form (podGroups) or the newer one (podGroup), not both.
func (b *builder) gangScheduling() {
	k := b.c.karta
	if k.Spec.OptimizationInstructions == nil || k.Spec.OptimizationInstructions.GangScheduling == nil {
		return
	}
	gs := k.Spec.OptimizationInstructions.GangScheduling
	fp := field.NewPath("spec", "optimizationInstructions", "gangScheduling")
	if len(gs.PodGroups) > 0 && gs.PodGroup != nil {
		b.add(field.Forbidden(fp, "set podGroups or podGroup, not both"))
		return
	}
	byName := map[string]int{}
	for i, c := range b.c.comps {
		if c.name != "" {
			if _, dup := byName[c.name]; !dup {
				byName[c.name] = i
			}
		}
	}
	names := sets.New[string]()
	for gi := range gs.PodGroups {
		b.podGroupsEntry(fp.Child("podGroups").Index(gi), &gs.PodGroups[gi], byName, names)
	}
	if t := gs.PodGroup; t != nil {
		b.podGroupTree(fp.Child("podGroup"), t, byName)
	}
}

// gangMember resolves a component name for a gang and says whether it is
// usable: the component exists. seen are the names of the gang's members
// so far; a name given twice is reported.
func (b *builder) gangMember(byName map[string]int, seen sets.Set[string], p *field.Path, name string) (int, bool) {
	i, ok := b.gangComponent(byName, p, name)
	if seen.Has(name) {
		b.add(field.Duplicate(p, name))
	}
	seen.Insert(name)
	return i, ok
}

// gangComponent is the index of the component name names.
func (b *builder) gangComponent(byName map[string]int, p *field.Path, name string) (int, bool) {
	if name == "" {
		b.add(field.Required(p, "a gang member names a component"))
		return 0, false
	}
	i, ok := byName[name]
	if !ok {
		b.add(field.NotFound(p, name))
		return 0, false
	}
	// A member without pods anywhere below it is allowed, as in
	// Workload Map: no pod is ever in its part of the gang.
	return i, true
}

// addGang finishes g and adds it when its members and the component tree
// are usable.
func (b *builder) addGang(g *gangDef, ok bool) {
	if ok && b.c.order != nil {
		b.c.finishGang(g)
		b.c.gangs = append(b.c.gangs, g)
	}
}

// podGroupsEntry compiles one gang definition of the older form; names
// are the gang names seen so far.
func (b *builder) podGroupsEntry(gp *field.Path, pg *kartav1alpha1.PodGroupDefinition, byName map[string]int, names sets.Set[string]) {
	g := &gangDef{name: pg.Name}
	if pg.Name == "" {
		b.add(field.Required(gp.Child("name"), "a gang definition needs a name"))
	} else if names.Has(pg.Name) {
		b.add(field.Duplicate(gp.Child("name"), pg.Name))
	}
	names.Insert(pg.Name)
	if len(pg.Members) == 0 {
		b.add(field.Required(gp.Child("members"), "a gang definition needs at least one member"))
	}
	ok := true
	seen := sets.New[string]()
	for mi, m := range pg.Members {
		mp := gp.Child("members").Index(mi)
		ci, found := b.gangMember(byName, seen, mp.Child("componentName"), m.ComponentName)
		ok = ok && found
		md := memberDef{comp: ci}
		for ki, kp := range m.GroupByKeyPaths {
			md.groupBy = append(md.groupBy, b.podExpr(mp.Child("groupByKeyPaths").Index(ki), kp, true))
		}
		for fi, f := range m.Filters {
			md.filters = append(md.filters, b.podExpr(mp.Child("filters").Index(fi), f, true))
		}
		if len(m.GroupByKeyPaths) > 0 {
			g.grouped = true
		}
		g.members = append(g.members, md)
		g.memberNames = append(g.memberNames, m.ComponentName)
	}
	b.addGang(g, ok)
}

// podGroupTree compiles the newer form: one whole-workload gang over the
// subGroups' components, or every component with pods.
func (b *builder) podGroupTree(tp *field.Path, t *kartav1alpha1.PodGroupTree, byName map[string]int) {
	g := &gangDef{name: t.Name}
	if g.name == "" {
		g.name = b.c.comps[0].name
	}
	if t.Topology != nil {
		b.topology(tp.Child("topology"), t.Topology)
		g.topologyRequired = t.Topology.RequiredTopologyLevel
		g.topologyPreferred = t.Topology.PreferredTopologyLevel
	}
	ok := true
	seen := sets.New[string]()
	for si, sg := range t.SubGroups {
		sp := tp.Child("subGroups").Index(si)
		ci, found := b.gangMember(byName, seen, sp.Child("componentName"), sg.ComponentName)
		ok = ok && found
		if sg.Topology != nil {
			b.topology(sp.Child("topology"), sg.Topology)
		}
		g.members = append(g.members, memberDef{comp: ci})
		g.memberNames = append(g.memberNames, sg.ComponentName)
	}
	if len(t.SubGroups) == 0 {
		for _, ci := range b.c.podComps {
			g.members = append(g.members, memberDef{comp: ci})
			g.memberNames = append(g.memberNames, b.c.comps[ci].name)
		}
		if len(g.members) == 0 {
			b.add(field.Invalid(tp, g.name, "the definition has no component with pods to gang"))
			ok = false
		}
	}
	b.addGang(g, ok)
}

// overrideGang prepares the gang a muster.io/min-member annotation asks
// for on a kind the definition does not gang: the whole workload, every
// component with pods, named after the root component.
func (b *builder) overrideGang() {
	if len(b.c.gangs) > 0 || len(b.c.podComps) == 0 || b.c.order == nil {
		return
	}
	g := &gangDef{name: b.c.comps[0].name}
	for _, ci := range b.c.podComps {
		g.members = append(g.members, memberDef{comp: ci})
		g.memberNames = append(g.memberNames, b.c.comps[ci].name)
	}
	b.c.finishGang(g)
	b.c.overrideGang = g
}

func (b *builder) topology(fp *field.Path, t *kartav1alpha1.TopologyConstraint) {
	for _, f := range []struct{ name, v string }{{"requiredTopologyLevel", t.RequiredTopologyLevel}, {"preferredTopologyLevel", t.PreferredTopologyLevel}} {
		if f.v == "" {
			continue
		}
		for _, msg := range validation.IsQualifiedName(f.v) {
			b.add(field.Invalid(fp.Child(f.name), f.v, "must be a node label key: "+msg))
		}
	}
}

// podBearing lists i, when it has pods, else its descendants with pods.
func (c *Compiled) podBearing(i int) []int {
	if c.comps[i].hasPods {
		return []int{i}
	}
	var out []int
	for _, ch := range c.comps[i].children {
		if c.comps[ch].hasPods {
			out = append(out, ch)
		} else {
			out = append(out, c.podBearing(ch)...)
		}
	}
	return out
}

// finishGang fills what follows from the members: the counted components
// and, for grouped gangs, the scope component.
func (c *Compiled) finishGang(g *gangDef) {
	seen := map[int]bool{}
	for _, m := range g.members {
		for _, ci := range c.podBearing(m.comp) {
			if !seen[ci] {
				seen[ci] = true
				g.counted = append(g.counted, ci)
			}
		}
	}
	g.sizeMember = -1
	if !g.grouped {
		return
	}
	if len(g.members) == 1 {
		if m := c.comps[g.members[0].comp]; !m.hasPods && (m.replicas != nil || m.minReplicas != nil) {
			g.sizeMember = g.members[0].comp
		}
	}
	scope := -1
	for _, m := range g.members {
		p := c.comps[m.comp].parent
		if p < 0 {
			p = m.comp // the root is its own scope
		}
		if scope < 0 {
			scope = p
		} else {
			scope = c.lca(scope, p)
		}
	}
	g.scope = scope
}

// lca is the lowest common ancestor of two components.
func (c *Compiled) lca(a, b int) int {
	for c.comps[a].depth > c.comps[b].depth {
		a = c.comps[a].parent
	}
	for c.comps[b].depth > c.comps[a].depth {
		b = c.comps[b].parent
	}
	for a != b {
		a, b = c.comps[a].parent, c.comps[b].parent
	}
	return a
}

// isAncestorOrSelf reports whether a is c or above c.
func (c *Compiled) isAncestorOrSelf(a, i int) bool {
	for ; i >= 0; i = c.comps[i].parent {
		if i == a {
			return true
		}
	}
	return false
}
