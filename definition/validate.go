package definition

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
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
// lists the matches: the order of the fields of its StatusMappings
// (initializing, running, completed, failed, degraded, suspended,
// suspending, resuming), which its recordings keep (a PyTorchJob that has
// started and completed gives [Initializing Completed]). Status.Statuses
// follows it; which of them is the primary phase is primaryOrder's call.
var statusOrder = [...]kartav1alpha1.ResourceStatus{
	kartav1alpha1.StatusInitializing, kartav1alpha1.StatusRunning, kartav1alpha1.StatusCompleted, kartav1alpha1.StatusFailed,
	kartav1alpha1.StatusDegraded, kartav1alpha1.StatusSuspended, kartav1alpha1.StatusSuspending, kartav1alpha1.StatusResuming,
}

// primaryOrder ranks matched statuses for Status.Primary: transitions first
// (an object being suspended or resumed says so even when its old state
// still holds), then the settled states, so that a started job that has
// completed is Completed, not Initializing.
var primaryOrder = [...]kartav1alpha1.ResourceStatus{
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
	lists := [len(statusOrder)][]kartav1alpha1.StatusMatcher{m.Initializing, m.Running, m.Completed, m.Failed, m.Degraded, m.Suspended, m.Suspending, m.Resuming}
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
