package definition

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition/jq"
)

// Limits on what a definition may contain. A definition is code written by
// whoever may create a Karta, and gojq's parser and compiler recurse over the
// expression: an expression of a few hundred thousand terms overflows the Go
// stack, which no recover() can catch. So every input is bounded before gojq
// sees it. Each limit is far above what a real definition needs (the longest
// expression of the catalog and of the upstream Workload Map catalog is under
// 600 bytes, the largest definition under 18 KiB with 19 components); the CRD
// schema enforces the same numbers where the apiserver can (maxLength,
// maxItems), and muster validate and the pod-grouper check them all.
const (
	// MaxExpressionBytes bounds one jq expression (the sandbox's bound).
	MaxExpressionBytes = jq.MaxExpressionBytes
	// MaxExpressionNesting bounds how deeply parentheses, brackets, braces
	// and string interpolations nest inside one expression.
	MaxExpressionNesting = jq.MaxExpressionNesting
	// MaxEvalSteps bounds the jq instructions of one evaluation.
	MaxEvalSteps = jq.MaxEvalSteps
	// MaxEvalBytes bounds what the growth constructs of one evaluation may
	// build, in bytes.
	MaxEvalBytes = jq.MaxEvalBytes
	// MaxDefinitionBytes bounds one definition document as decoded. It is
	// above what etcd keeps (1.5 MiB less the object's overhead is the
	// apiserver's limit, and a file may be bigger) only so far that an
	// oversized expression is still reported by its field, below.
	MaxDefinitionBytes = 1 << 20
	// MaxComponents bounds the components of one definition (root included).
	MaxComponents = 64
	// MaxListItems bounds every other list of a definition: additional child
	// kinds, pod groups, members, key paths, filters, matchers, conditions,
	// suspend and resume actions, sub-groups, matchLabels entries.
	MaxListItems = 64
	// MaxCount is the ceiling of every replica count a definition reads,
	// of every pod count it computes (a component's pods, a gang's
	// min-member) and of the muster.io/min-member annotation. Kubernetes
	// supports clusters of 150,000 pods; one workload of more than
	// 100,000 pods is a mistake (often an expression gone wrong), and
	// refusing it says so where a PodGroup of that size would wait forever.
	MaxCount = 100_000
)

// maxValueInMessage is how much of an oversized value a message repeats.
const maxValueInMessage = 64

// shorten keeps error messages about oversized values readable: the value
// itself is what the user sent, so its start is enough to find it.
func shorten(s string, keep int) string {
	if len(s) <= keep {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(s[:keep], ""), len(s))
}

// bounds checks the sizes of the definition's lists before anything is
// compiled, so that a definition with a million components is refused in
// one message instead of a million.
func (b *builder) bounds() {
	sd := &b.c.karta.Spec.StructureDefinition
	if n := 1 + len(sd.ChildComponents); n > MaxComponents {
		b.add(field.TooMany(structurePath.Child("childComponents"), n-1, MaxComponents-1))
	}
	list := func(fp *field.Path, n int) {
		if n > MaxListItems {
			b.add(field.TooMany(fp, n, MaxListItems))
		}
	}
	list(structurePath.Child("additionalChildKinds"), len(sd.AdditionalChildKinds))
	comps := append([]kartav1alpha1.ComponentDefinition{sd.RootComponent}, sd.ChildComponents...)
	for i := range comps {
		if i >= MaxComponents {
			break
		}
		c := &comps[i]
		fp := structurePath.Child("rootComponent")
		if i > 0 {
			fp = structurePath.Child("childComponents").Index(i - 1)
		}
		if s := c.PodSelector; s != nil && s.ComponentTypeSelector != nil {
			list(fp.Child("podSelector", "componentTypeSelector", "matchLabels"), len(s.ComponentTypeSelector.MatchLabels))
		}
		if s := c.SuspendDefinition; s != nil {
			list(fp.Child("suspendDefinition", "suspendActions"), len(s.SuspendActions))
			list(fp.Child("suspendDefinition", "resumeActions"), len(s.ResumeActions))
		}
		if s := c.StatusDefinition; s != nil {
			m := s.StatusMappings
			mp := fp.Child("statusDefinition", "statusMappings")
			for name, ms := range map[string][]kartav1alpha1.StatusMatcher{
				"initializing": m.Initializing, "running": m.Running, "completed": m.Completed, "failed": m.Failed,
				"degraded": m.Degraded, "suspended": m.Suspended, "suspending": m.Suspending, "resuming": m.Resuming,
			} {
				list(mp.Child(name), len(ms))
				for j := range ms {
					if j < MaxListItems {
						list(mp.Child(name).Index(j).Child("byConditions"), len(ms[j].ByConditions))
					}
				}
			}
		}
	}
	oi := b.c.karta.Spec.OptimizationInstructions
	if oi == nil || oi.GangScheduling == nil {
		return
	}
	gp := field.NewPath("spec", "optimizationInstructions", "gangScheduling")
	list(gp.Child("podGroups"), len(oi.GangScheduling.PodGroups))
	for i, pg := range oi.GangScheduling.PodGroups {
		if i >= MaxListItems {
			break
		}
		pp := gp.Child("podGroups").Index(i)
		list(pp.Child("members"), len(pg.Members))
		for j, m := range pg.Members {
			if j >= MaxListItems {
				break
			}
			list(pp.Child("members").Index(j).Child("groupByKeyPaths"), len(m.GroupByKeyPaths))
			list(pp.Child("members").Index(j).Child("filters"), len(m.Filters))
		}
	}
	if t := oi.GangScheduling.PodGroup; t != nil {
		list(gp.Child("podGroup", "subGroups"), len(t.SubGroups))
	}
}
