package definition

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

var structurePath = field.NewPath("spec", "structureDefinition")

// components checks and compiles the component tree.
func (b *builder) components() {
	sd := &b.c.karta.Spec.StructureDefinition
	defs := []*kartav1alpha1.ComponentDefinition{&sd.RootComponent}
	paths := []*field.Path{structurePath.Child("rootComponent")}
	for i := range sd.ChildComponents {
		defs = append(defs, &sd.ChildComponents[i])
		paths = append(paths, structurePath.Child("childComponents").Index(i))
	}
	byName := b.componentNames(defs, paths)
	b.rootComponent(sd)
	treeOK := b.parents(defs, byName) && b.noCycles(defs)
	if treeOK {
		b.treeOrder()
	}
	for i, comp := range b.c.comps {
		b.component(i, comp)
	}
	if !treeOK {
		b.c.order = nil
	}
}

// componentNames adds a component per definition, checking its name and
// kind, and returns the index of each name.
func (b *builder) componentNames(defs []*kartav1alpha1.ComponentDefinition, paths []*field.Path) map[string]int {
	byName := map[string]int{}
	for i, d := range defs {
		comp := &component{def: d, name: d.Name, fp: paths[i], parent: -1}
		b.c.comps = append(b.c.comps, comp)
		switch {
		case d.Name == "":
			b.add(field.Required(paths[i].Child("name"), "every component needs a name"))
		default:
			if _, dup := byName[d.Name]; dup {
				b.add(field.Duplicate(paths[i].Child("name"), d.Name))
			} else {
				byName[d.Name] = i
			}
		}
		if d.Kind != nil {
			b.kind(paths[i].Child("kind"), d.Kind)
			gvk := schema.GroupVersionKind{Group: d.Kind.Group, Version: d.Kind.Version, Kind: d.Kind.Kind}
			comp.kind = &gvk
		}
	}
	return byName
}

// rootComponent checks what only the root has: a kind, no owner; and the
// additional child kinds.
func (b *builder) rootComponent(sd *kartav1alpha1.StructureDefinition) {
	root := b.c.comps[0]
	if sd.RootComponent.Kind == nil {
		b.add(field.Required(root.fp.Child("kind"), "the root component needs a kind (group, version, kind)"))
	} else {
		b.c.rootGVK = *root.kind
	}
	if sd.RootComponent.OwnerRef != nil {
		b.add(field.Forbidden(root.fp.Child("ownerRef"), "the root component has no owner"))
	}
	for i, gvk := range sd.AdditionalChildKinds {
		b.kind(structurePath.Child("additionalChildKinds").Index(i), &gvk)
	}
}

// parents links each child component to the component its ownerRef
// names. It reports whether every child has a parent.
func (b *builder) parents(defs []*kartav1alpha1.ComponentDefinition, byName map[string]int) bool {
	treeOK := true
	for i := 1; i < len(defs); i++ {
		d, comp := defs[i], b.c.comps[i]
		fp := comp.fp.Child("ownerRef")
		switch {
		case d.OwnerRef == nil || *d.OwnerRef == "":
			b.add(field.Required(fp, "a child component names its parent component"))
			treeOK = false
		default:
			p, ok := byName[*d.OwnerRef]
			switch {
			case !ok:
				b.add(field.NotFound(fp, *d.OwnerRef))
				treeOK = false
			case p == i:
				b.add(field.Invalid(fp, *d.OwnerRef, "a component cannot own itself"))
				treeOK = false
			default:
				comp.parent = p
			}
		}
	}
	return treeOK
}

// noCycles reports whether every component leads up to the root.
func (b *builder) noCycles(defs []*kartav1alpha1.ComponentDefinition) bool {
	treeOK := true
	for i := 1; i < len(defs); i++ {
		// A child that does not reach the root within len(defs) steps
		// sits on a cycle (or below one).
		p, steps := i, 0
		for p > 0 && steps <= len(defs) {
			p = b.c.comps[p].parent
			steps++
		}
		if p != 0 {
			b.add(field.Invalid(b.c.comps[i].fp.Child("ownerRef"), *defs[i].OwnerRef, "owner references form a cycle; every component must lead up to the root component"))
			treeOK = false
		}
	}
	return treeOK
}

// treeOrder lists the components parents first, in definition order
// within a level, and sets their children and depths.
func (b *builder) treeOrder() {
	comps := b.c.comps
	b.c.order = []int{0}
	for n := 0; n < len(b.c.order); n++ {
		at := b.c.order[n]
		for i := 1; i < len(comps); i++ {
			if comps[i].parent == at {
				comps[at].children = append(comps[at].children, i)
				comps[i].depth = comps[at].depth + 1
				b.c.order = append(b.c.order, i)
			}
		}
	}
}

// kind checks a group/version/kind.
func (b *builder) kind(fp *field.Path, k *kartav1alpha1.GroupVersionKind) {
	if k.Version == "" {
		b.add(field.Required(fp.Child("version"), "a kind needs its API version"))
	}
	if k.Kind == "" {
		b.add(field.Required(fp.Child("kind"), "a kind needs its kind name"))
	}
	// The empty group is the core API group, whose only version is v1.
	if k.Group == "" && k.Version != "" && k.Version != "v1" {
		b.add(field.Invalid(fp.Child("group"), k.Group, fmt.Sprintf("the group may be empty only for core kinds (version v1); version %q needs its group", k.Version)))
	}
}

// component checks and compiles one component's definitions.
func (b *builder) component(i int, comp *component) {
	d, fp := comp.def, comp.fp
	if d.StatusDefinition != nil {
		if i != 0 {
			b.add(field.Forbidden(fp.Child("statusDefinition"), "only the root component has a statusDefinition"))
		} else {
			b.c.status = b.statusDefinition(fp.Child("statusDefinition"), d.StatusDefinition)
		}
	}
	comp.instanceID = b.optExpr(fp.Child("instanceIdPath"), d.InstanceIDPath)
	if sd := d.ScaleDefinition; sd != nil {
		sp := fp.Child("scaleDefinition")
		comp.replicas = b.optExpr(sp.Child("replicasPath"), sd.ReplicasPath)
		comp.minReplicas = b.optExpr(sp.Child("minReplicasPath"), sd.MinReplicasPath)
		comp.maxReplicas = b.optExpr(sp.Child("maxReplicasPath"), sd.MaxReplicasPath)
	}
	if d.SpecDefinition != nil {
		comp.hasPods = true
		b.c.podComps = append(b.c.podComps, i)
		b.specDefinition(fp.Child("specDefinition"), d.SpecDefinition, comp)
	}
	if ps := d.PodSelector; ps != nil {
		pp := fp.Child("podSelector")
		if ts := ps.ComponentTypeSelector; ts != nil {
			tp := pp.Child("componentTypeSelector")
			comp.typeSelector = true
			b.c.typeSelectors = true
			if ts.KeyPath == "" && len(ts.MatchLabels) == 0 {
				b.add(field.Required(tp, "set keyPath (with an optional value) or matchLabels"))
			}
			if ts.Value != nil && ts.KeyPath == "" {
				b.add(field.Required(tp.Child("keyPath"), "value needs a keyPath to compare with"))
			}
			comp.typeKey = b.podExpr(tp.Child("keyPath"), ts.KeyPath, false)
			comp.typeValue = ts.Value
			for key := range ts.MatchLabels {
				for _, msg := range validation.IsQualifiedName(key) {
					b.add(field.Invalid(tp.Child("matchLabels").Key(key), key, msg))
				}
			}
			comp.matchLabels = ts.MatchLabels
		}
		if is := ps.ComponentInstanceSelector; is != nil {
			ip := pp.Child("componentInstanceSelector")
			comp.instanceSel = b.podExpr(ip.Child("idPath"), is.IDPath, true)
			if d.InstanceIDPath == nil {
				b.add(field.Required(fp.Child("instanceIdPath"), "componentInstanceSelector needs instanceIdPath on the component to compare with"))
			}
		}
		if rs := ps.ReplicaSelector; rs != nil {
			comp.replicaSel = b.podExpr(pp.Child("replicaSelector", "keyPath"), rs.KeyPath, true)
		}
	}
	if d.InstanceIDPath != nil && comp.hasPods && (d.PodSelector == nil || d.PodSelector.ComponentInstanceSelector == nil) {
		b.add(field.Required(fp.Child("podSelector", "componentInstanceSelector"), "a component with pods and instanceIdPath needs componentInstanceSelector to tell which instance a pod belongs to"))
	}
	if sus := d.SuspendDefinition; sus != nil {
		sp := fp.Child("suspendDefinition")
		for j, a := range sus.SuspendActions {
			b.compileExpr(sp.Child("suspendActions").Index(j).Child("path"), a.Path, true)
		}
		for j, a := range sus.ResumeActions {
			b.compileExpr(sp.Child("resumeActions").Index(j).Child("path"), a.Path, true)
		}
	}
}

func (b *builder) specDefinition(fp *field.Path, sd *kartav1alpha1.SpecDefinition, comp *component) {
	shapes := 0
	if sd.PodTemplateSpecPath != nil {
		shapes++
	}
	if sd.PodSpecPath != nil {
		shapes++
	}
	if sd.FragmentedPodSpecDefinition != nil {
		shapes++
	}
	if shapes != 1 {
		b.add(field.Invalid(fp, fmt.Sprintf("%d shapes set", shapes), "set exactly one of podTemplateSpecPath, podSpecPath (with optional metadataPath) and fragmentedPodSpecDefinition"))
	}
	if sd.MetadataPath != nil && sd.PodSpecPath == nil {
		b.add(field.Forbidden(fp.Child("metadataPath"), "metadataPath goes only with podSpecPath"))
	}
	s := &comp.spec
	s.podTemplateSpec = b.optExpr(fp.Child("podTemplateSpecPath"), sd.PodTemplateSpecPath)
	s.podSpec = b.optExpr(fp.Child("podSpecPath"), sd.PodSpecPath)
	s.metadata = b.optExpr(fp.Child("metadataPath"), sd.MetadataPath)
	switch {
	case s.podTemplateSpec != nil:
		s.writes[writeSchedulerName] = newWriteTarget(s.podTemplateSpec, "podTemplateSpecPath", true, "spec", "schedulerName")
		s.writes[writeLabels] = newWriteTarget(s.podTemplateSpec, "podTemplateSpecPath", true, "metadata", "labels")
		s.writes[writeAnnotations] = newWriteTarget(s.podTemplateSpec, "podTemplateSpecPath", true, "metadata", "annotations")
	case s.podSpec != nil:
		s.writes[writeSchedulerName] = newWriteTarget(s.podSpec, "podSpecPath", true, "schedulerName")
		s.writes[writeLabels] = newWriteTarget(s.metadata, "metadataPath", false, "labels")
		s.writes[writeAnnotations] = newWriteTarget(s.metadata, "metadataPath", false, "annotations")
	}
	f := sd.FragmentedPodSpecDefinition
	if f == nil {
		return
	}
	ff := fp.Child("fragmentedPodSpecDefinition")
	fe := &fragExprs{
		schedulerName:     b.optExpr(ff.Child("schedulerNamePath"), f.SchedulerNamePath),
		labels:            b.optExpr(ff.Child("labelsPath"), f.LabelsPath),
		annotations:       b.optExpr(ff.Child("annotationsPath"), f.AnnotationsPath),
		resources:         b.optExpr(ff.Child("resourcesPath"), f.ResourcesPath),
		resourceClaims:    b.optExpr(ff.Child("resourceClaimsPath"), f.ResourceClaimsPath),
		podAffinity:       b.optExpr(ff.Child("podAffinityPath"), f.PodAffinityPath),
		nodeAffinity:      b.optExpr(ff.Child("nodeAffinityPath"), f.NodeAffinityPath),
		containers:        b.optExpr(ff.Child("containersPath"), f.ContainersPath),
		container:         b.optExpr(ff.Child("containerPath"), f.ContainerPath),
		priorityClassName: b.optExpr(ff.Child("priorityClassNamePath"), f.PriorityClassNamePath),
		image:             b.optExpr(ff.Child("imagePath"), f.ImagePath),
	}
	if *f == (kartav1alpha1.FragmentedPodSpecDefinition{}) {
		b.add(field.Required(ff, "set at least one path"))
	}
	s.frag = fe
	if s.podTemplateSpec == nil && s.podSpec == nil {
		s.writes[writeSchedulerName] = newWriteTarget(fe.schedulerName, "fragmentedPodSpecDefinition.schedulerNamePath", false)
		s.writes[writeLabels] = newWriteTarget(fe.labels, "fragmentedPodSpecDefinition.labelsPath", false)
		s.writes[writeAnnotations] = newWriteTarget(fe.annotations, "fragmentedPodSpecDefinition.annotationsPath", false)
	}
}

// statusDef is a compiled statusDefinition.
type statusDef struct {
	phase                                             *expr
	conditions                                        *expr
	typeField, statusField, messageField, reasonField string
	// mappings are in the order of statusOrder.
	mappings [len(statusOrder)][]matcherDef
}

type matcherDef struct {
	byPhase      string
	byConditions []kartav1alpha1.ExpectedCondition
	expr         *expr
	expected     string
}

// statusOrder is the order in which Workload Map evaluates the mappings and
// lists the matches: transitions first (an object being suspended or resumed
// says so even when its old state still holds), then the settled states.
// Status.Statuses follows it, so its first entry is the primary phase.
var statusOrder = [...]kartav1alpha1.ResourceStatus{
	kartav1alpha1.StatusResuming, kartav1alpha1.StatusSuspending, kartav1alpha1.StatusSuspended, kartav1alpha1.StatusRunning,
	kartav1alpha1.StatusFailed, kartav1alpha1.StatusCompleted, kartav1alpha1.StatusInitializing, kartav1alpha1.StatusDegraded,
}

func (b *builder) statusDefinition(fp *field.Path, sd *kartav1alpha1.StatusDefinition) *statusDef {
	s := &statusDef{typeField: "type", statusField: "status", messageField: "message", reasonField: "reason"}
	if pd := sd.PhaseDefinition; pd != nil {
		s.phase = b.compileExpr(fp.Child("phaseDefinition", "path"), pd.Path, true)
	}
	if cd := sd.ConditionsDefinition; cd != nil {
		s.conditions = b.compileExpr(fp.Child("conditionsDefinition", "path"), cd.Path, true)
		if cd.TypeFieldName != "" {
			s.typeField = cd.TypeFieldName
		}
		if cd.StatusFieldName != "" {
			s.statusField = cd.StatusFieldName
		}
		if cd.MessageFieldName != nil && *cd.MessageFieldName != "" {
			s.messageField = *cd.MessageFieldName
		}
		if cd.ReasonFieldName != nil && *cd.ReasonFieldName != "" {
			s.reasonField = *cd.ReasonFieldName
		}
	}
	m := &sd.StatusMappings
	lists := [len(statusOrder)][]kartav1alpha1.StatusMatcher{m.Resuming, m.Suspending, m.Suspended, m.Running, m.Failed, m.Completed, m.Initializing, m.Degraded}
	for si, list := range lists {
		lp := fp.Child("statusMappings", strings.ToLower(string(statusOrder[si][:1]))+string(statusOrder[si][1:]))
		for j, sm := range list {
			mp := lp.Index(j)
			md := matcherDef{byPhase: sm.ByPhase, byConditions: sm.ByConditions}
			if sm.ByPhase == "" && len(sm.ByConditions) == 0 && sm.ByExpression == nil {
				b.add(field.Required(mp, "a matcher sets byPhase, byConditions or byExpression"))
			}
			if sm.ByPhase != "" && sd.PhaseDefinition == nil {
				b.add(field.Required(fp.Child("phaseDefinition"), "byPhase at "+mp.Child("byPhase").String()+" needs phaseDefinition"))
			}
			if len(sm.ByConditions) > 0 && sd.ConditionsDefinition == nil {
				b.add(field.Required(fp.Child("conditionsDefinition"), "byConditions at "+mp.Child("byConditions").String()+" needs conditionsDefinition"))
			}
			for ci, ec := range sm.ByConditions {
				if ec.Type == "" {
					b.add(field.Required(mp.Child("byConditions").Index(ci).Child("type"), "a condition type is required"))
				}
			}
			if be := sm.ByExpression; be != nil {
				md.expr = b.compileExpr(mp.Child("byExpression", "expression"), be.Expression, true)
				md.expected = be.ExpectedResult
			}
			s.mappings[si] = append(s.mappings[si], md)
		}
	}
	return s
}

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
// usable: the component exists.
func (b *builder) gangMember(byName map[string]int, p *field.Path, name string) (int, bool) {
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
		ci, found := b.gangMember(byName, mp.Child("componentName"), m.ComponentName)
		ok = ok && found
		if seen.Has(m.ComponentName) {
			b.add(field.Duplicate(mp.Child("componentName"), m.ComponentName))
		}
		seen.Insert(m.ComponentName)
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
		ci, found := b.gangMember(byName, sp.Child("componentName"), sg.ComponentName)
		ok = ok && found
		if seen.Has(sg.ComponentName) {
			b.add(field.Duplicate(sp.Child("componentName"), sg.ComponentName))
		}
		seen.Insert(sg.ComponentName)
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
