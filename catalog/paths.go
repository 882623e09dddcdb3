package catalog

import (
	"fmt"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

// RootPath is one jq expression of a definition that runs on the workload
// object, with the field path it is written at.
type RootPath struct {
	Field, Expr string
}

// RootObjectPaths lists the definition's paths that run on the workload
// object (the ones a CRD schema can check). Paths that run on pods
// (podSelector, groupByKeyPaths, filters) are left out.
func RootObjectPaths(k *kartav1alpha1.Karta) []RootPath {
	var out []RootPath
	add := func(f string, p *string) {
		if p != nil && *p != "" {
			out = append(out, RootPath{f, *p})
		}
	}
	sd := k.Spec.StructureDefinition
	comps := append([]kartav1alpha1.ComponentDefinition{sd.RootComponent}, sd.ChildComponents...)
	for i, c := range comps {
		base := "spec.structureDefinition.rootComponent"
		if i > 0 {
			base = fmt.Sprintf("spec.structureDefinition.childComponents[%d]", i-1)
		}
		add(base+".instanceIdPath", c.InstanceIDPath)
		if s := c.SpecDefinition; s != nil {
			add(base+".specDefinition.podTemplateSpecPath", s.PodTemplateSpecPath)
			add(base+".specDefinition.podSpecPath", s.PodSpecPath)
			add(base+".specDefinition.metadataPath", s.MetadataPath)
			if f := s.FragmentedPodSpecDefinition; f != nil {
				fb := base + ".specDefinition.fragmentedPodSpecDefinition."
				add(fb+"schedulerNamePath", f.SchedulerNamePath)
				add(fb+"labelsPath", f.LabelsPath)
				add(fb+"annotationsPath", f.AnnotationsPath)
				add(fb+"resourcesPath", f.ResourcesPath)
				add(fb+"resourceClaimsPath", f.ResourceClaimsPath)
				add(fb+"podAffinityPath", f.PodAffinityPath)
				add(fb+"nodeAffinityPath", f.NodeAffinityPath)
				add(fb+"containersPath", f.ContainersPath)
				add(fb+"containerPath", f.ContainerPath)
				add(fb+"priorityClassNamePath", f.PriorityClassNamePath)
				add(fb+"imagePath", f.ImagePath)
			}
		}
		if s := c.ScaleDefinition; s != nil {
			add(base+".scaleDefinition.replicasPath", s.ReplicasPath)
			add(base+".scaleDefinition.minReplicasPath", s.MinReplicasPath)
			add(base+".scaleDefinition.maxReplicasPath", s.MaxReplicasPath)
		}
		if s := c.StatusDefinition; s != nil {
			if s.PhaseDefinition != nil {
				p := s.PhaseDefinition.Path
				add(base+".statusDefinition.phaseDefinition.path", &p)
			}
			if s.ConditionsDefinition != nil {
				p := s.ConditionsDefinition.Path
				add(base+".statusDefinition.conditionsDefinition.path", &p)
			}
			m := s.StatusMappings
			for _, st := range []struct {
				name string
				ms   []kartav1alpha1.StatusMatcher
			}{
				{"initializing", m.Initializing}, {"running", m.Running}, {"completed", m.Completed}, {"failed", m.Failed},
				{"degraded", m.Degraded}, {"suspended", m.Suspended}, {"suspending", m.Suspending}, {"resuming", m.Resuming},
			} {
				for j, sm := range st.ms {
					if sm.ByExpression != nil {
						p := sm.ByExpression.Expression
						add(fmt.Sprintf("%s.statusDefinition.statusMappings.%s[%d].byExpression.expression", base, st.name, j), &p)
					}
				}
			}
		}
		if s := c.SuspendDefinition; s != nil {
			for j, a := range s.SuspendActions {
				p := a.Path
				add(fmt.Sprintf("%s.suspendDefinition.suspendActions[%d].path", base, j), &p)
			}
			for j, a := range s.ResumeActions {
				p := a.Path
				add(fmt.Sprintf("%s.suspendDefinition.resumeActions[%d].path", base, j), &p)
			}
		}
	}
	return out
}
