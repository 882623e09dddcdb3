package definition

import (
	"errors"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition/jq"
)

// DefaultGPUResourceNames are the extended resources, and the DRA
// DeviceClasses (ClaimGPUs), counted as GPUs unless configured otherwise.
var DefaultGPUResourceNames = []corev1.ResourceName{"nvidia.com/gpu", "amd.com/gpu", "gpu.nvidia.com", "gpu.amd.com"}

// Options tune compilation and evaluation.
type Options struct {
	// Timeout bounds one evaluation of one expression (default 1s).
	Timeout time.Duration
	// MaxResults caps the values one expression may yield (default 10000).
	MaxResults int
	// GPUResourceNames are counted as GPUs (default DefaultGPUResourceNames).
	GPUResourceNames []corev1.ResourceName
}

// Errors callers branch on.
var (
	// ErrNoComponent: the pod matches no component of the definition.
	ErrNoComponent = errors.New("pod matches no component of the definition")
	// ErrNotWritable: a path of the definition cannot be written.
	ErrNotWritable = errors.New("path cannot be written")
	// ErrTimeout: an evaluation did not end within Options.Timeout. Unlike
	// the step and byte budgets it depends on the machine's load.
	ErrTimeout = jq.ErrTimeout
)

// Workload is what a definition finds in one root object.
type Workload struct {
	// Components in definition order, root first.
	Components []Component
}

// Component is one component with the instances found in the object.
type Component struct {
	Name   string
	Parent string // "" for the root
	// Kind is nil for logical groupings.
	Kind *schema.GroupVersionKind
	// HasPods is true when the component has a specDefinition.
	HasPods   bool
	Instances []Instance
}

// Instance is one instance of a component (one entry of an array or map
// when the component has instanceIdPath, else the only one with ID "").
type Instance struct {
	ID string
	// Template is the pod template of the instance (nil without spec).
	Template *corev1.PodTemplateSpec
	// Replicas, MinReplicas, MaxReplicas as the definition's paths give them:
	// the component's own totals, not multiplied by the parent's. Replicas
	// is 1 when there is no path.
	Replicas    int32
	MinReplicas *int32
	MaxReplicas *int32
	// Pods is the number of pods this instance stands for in the whole
	// workload: Replicas for a component with pods, the sum of its
	// children's for one without. MinPods is the same with MinReplicas
	// where set.
	Pods    int64
	MinPods int64
}

// Status is the root object's status in the shared vocabulary.
type Status struct {
	Phase      string
	Conditions []Condition
	// Statuses matched, in Workload Map's order (Initializing, Running,
	// Completed, Failed, Degraded, Suspended, Suspending, Resuming);
	// [Undefined] when none. Primary says which one the workload is in.
	Statuses []kartav1alpha1.ResourceStatus
}

// Primary is the phase the workload is in when several match: a
// transition (Resuming, Suspending) first, then Suspended, Running, Failed,
// Completed, Initializing and Degraded; Undefined when none matched.
func (s *Status) Primary() kartav1alpha1.ResourceStatus {
	for _, p := range primaryOrder {
		if slices.Contains(s.Statuses, p) {
			return p
		}
	}
	return kartav1alpha1.StatusUndefined
}

// ByPrecedence is Statuses with Primary first and the others after it in
// Workload Map's order: the way a person reads them.
func (s *Status) ByPrecedence() []kartav1alpha1.ResourceStatus {
	p := s.Primary()
	out := make([]kartav1alpha1.ResourceStatus, 0, len(s.Statuses))
	out = append(out, p)
	for _, x := range s.Statuses {
		if x != p {
			out = append(out, x)
		}
	}
	return out
}

// Condition is one condition read through conditionsDefinition.
type Condition struct {
	Type, Status, Reason, Message string
}

// PodMatch says where a pod belongs in the workload.
type PodMatch struct {
	Component string
	Instance  string // "" for single-instance components
	Replica   string // replicaSelector's value, "" without one
}

// Gang is the gang instance a pod belongs to.
type Gang struct {
	// Definition is the gang definition's name (podGroups[].name or podGroup.name).
	Definition string
	// Keys are the values of the groupByKeyPaths, in order; empty for a
	// whole-workload gang. Definition+Keys identify the gang instance.
	Keys []string
	// MinMember is the number of pods that must be placed together.
	MinMember int32
	// MinResources is the sum of the requests of MinMember pods. It may be
	// shared with the compiled definition's cache (every pod of a gang gets
	// the same map): read it, or DeepCopy it before changing it.
	MinResources corev1.ResourceList
	// Members are the member component names.
	Members []string
	// TopologyRequired / TopologyPreferred are node label keys ("" when unset).
	TopologyRequired  string
	TopologyPreferred string
	// Overridden tells which workload annotation changed MinMember, if any.
	Overridden bool
}

// GangPlan is what a gang definition yields on a root object alone, without
// pods: how many gang instances and how big each is. The CLI shows it offline.
type GangPlan struct {
	Definition        string
	Members           []string
	Instances         int
	MinMember         int32 // per instance
	MinResources      corev1.ResourceList
	TopologyRequired  string
	TopologyPreferred string
}

// TemplatePatch is what write-back sets on every pod template of a workload.
type TemplatePatch struct {
	SchedulerName string
	Labels        map[string]string
	Annotations   map[string]string
}

// Compiled is a validated definition with every expression compiled. It is
// safe for concurrent use: compiled expressions are only run, never changed,
// and the per-object cache is guarded by a mutex.
type Compiled struct {
	karta *kartav1alpha1.Karta
	opts  Options

	name    string
	rootGVK schema.GroupVersionKind
	// comps are the components in definition order, root first; order lists
	// their indexes parents first.
	comps []*component
	order []int
	// typeSelectors is true when any component has a componentTypeSelector.
	typeSelectors bool
	// podComps lists the components with pods.
	podComps []int

	status *statusDef
	gangs  []*gangDef
	// overrideGang gangs every pod of a workload whose definition has no
	// gang instruction, used only when the workload sets
	// muster.io/min-member: the override works for every kind.
	overrideGang *gangDef
	// refs are the declared references (muster.io/references), whose
	// objects root-side expressions read as $name.
	refs []*refDef
	// topoRequired and topoPreferred read a gang's topology keys from the
	// workload (topologypath.go); nil without.
	topoRequired, topoPreferred *expr

	// podNeeds is what the pod-side expressions can read of a pod.
	podNeeds *jq.Reads

	cache   planCache
	lastPod atomic.Pointer[podMemo]

	// onEval, when set, is called with every expression eval runs through
	// jq (not those it reads as a constant path): the benchmarks record
	// what one call evaluates. Nil outside them.
	onEval func(*expr)
}

// Definition returns the definition compiled.
func (c *Compiled) Definition() *kartav1alpha1.Karta { return c.karta }

// RootGVK is the root component's kind.
func (c *Compiled) RootGVK() schema.GroupVersionKind { return c.rootGVK }
