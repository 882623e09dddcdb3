package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, Version and Kind of the definition API. They are those of the Karta
// format so that a definition written for NVIDIA Workload Map is a muster
// definition as it stands.
const (
	Group      = "run.ai"
	Version    = "v1alpha1"
	Kind       = "Karta"
	APIVersion = Group + "/" + Version
)

// The format's earlier name, from the run-ai/karta releases before the
// rename: the same fields under another group and kind. muster still reads
// it, in files and as cluster objects when that CRD is served, and says it
// is deprecated; "muster validate --convert" writes the Karta form.
const (
	LegacyGroup      = "optimization.nvidia.com"
	LegacyKind       = "ResourceInterface"
	LegacyResource   = "resourceinterfaces"
	LegacyAPIVersion = LegacyGroup + "/" + Version
)

// Karta is one workload definition: where a workload type keeps its roles,
// pod templates, replica counts and status, and how its pods form gangs.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName={krt}
// +kubebuilder:printcolumn:name="Framework",type="string",JSONPath=".spec.structureDefinition.rootComponent.kind.kind"
// +kubebuilder:printcolumn:name="Group",type="string",JSONPath=".spec.structureDefinition.rootComponent.kind.group"
// +kubebuilder:printcolumn:name="Valid",type="string",JSONPath=".status.conditions[?(@.type=='Valid')].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Karta struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KartaSpec   `json:"spec,omitempty"`
	Status KartaStatus `json:"status,omitempty"`
}

// KartaList is a list of Kartas.
//
// +kubebuilder:object:root=true
type KartaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Karta `json:"items"`
}

// KartaSpec holds the structure of a workload type and the optimization
// instructions for it.
type KartaSpec struct {
	// StructureDefinition is the tree of components, root first.
	StructureDefinition StructureDefinition `json:"structureDefinition"`

	// OptimizationInstructions says how the workload's pods are optimized;
	// muster reads gangScheduling.
	// +optional
	OptimizationInstructions *OptimizationInstructions `json:"optimizationInstructions,omitempty"`
}

// KartaStatus is written by the pod-grouper for cluster definitions.
type KartaStatus struct {
	// Conditions; muster sets "Valid".
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StructureDefinition is the component tree of a workload type.
type StructureDefinition struct {
	// RootComponent is the workload object itself (JobSet, RayCluster, …).
	RootComponent ComponentDefinition `json:"rootComponent"`

	// ChildComponents are the roles and objects below the root. Each names
	// its parent with ownerRef.
	// +optional
	// +kubebuilder:validation:MaxItems=63
	ChildComponents []ComponentDefinition `json:"childComponents,omitempty"`

	// AdditionalChildKinds lists kinds the workload creates that are not
	// modelled as components (for RBAC).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	AdditionalChildKinds []GroupVersionKind `json:"additionalChildKinds,omitempty"`
}

// GroupVersionKind names a Kubernetes kind.
type GroupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// ComponentDefinition is one node of the component tree.
type ComponentDefinition struct {
	// Name is unique within the definition.
	Name string `json:"name"`

	// Kind of the object this component stands for. Required on the root;
	// a child without kind is a logical grouping.
	// +optional
	Kind *GroupVersionKind `json:"kind,omitempty"`

	// OwnerRef names the parent component; empty on the root.
	// +optional
	OwnerRef *string `json:"ownerRef,omitempty"`

	// SpecDefinition says where the component's pod template lives.
	// +optional
	SpecDefinition *SpecDefinition `json:"specDefinition,omitempty"`

	// ScaleDefinition says where the component's replica counts live.
	// +optional
	ScaleDefinition *ScaleDefinition `json:"scaleDefinition,omitempty"`

	// StatusDefinition maps the root object's status to the shared
	// vocabulary. Root only.
	// +optional
	StatusDefinition *StatusDefinition `json:"statusDefinition,omitempty"`

	// SuspendDefinition says how the component is suspended and resumed.
	// +optional
	SuspendDefinition *SuspendDefinition `json:"suspendDefinition,omitempty"`

	// InstanceIDPath yields one id per instance for components that hold
	// several pod definitions (an array or a map). Other paths of the
	// component yield one value per instance, index-aligned with it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	InstanceIDPath *string `json:"instanceIdPath,omitempty"`

	// PodSelector tells which pods belong to this component.
	// +optional
	PodSelector *PodSelector `json:"podSelector,omitempty"`
}

// SpecDefinition says where a component's pod template is. Exactly one of
// podTemplateSpecPath, podSpecPath (with optional metadataPath) and
// fragmentedPodSpecDefinition is set.
type SpecDefinition struct {
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	PodTemplateSpecPath *string `json:"podTemplateSpecPath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	PodSpecPath *string `json:"podSpecPath,omitempty"`
	// MetadataPath goes with podSpecPath when metadata sits beside the spec.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	MetadataPath *string `json:"metadataPath,omitempty"`
	// +optional
	FragmentedPodSpecDefinition *FragmentedPodSpecDefinition `json:"fragmentedPodSpecDefinition,omitempty"`
}

// FragmentedPodSpecDefinition gives one path per pod field for kinds whose
// pod spec is scattered over their own fields.
type FragmentedPodSpecDefinition struct {
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	SchedulerNamePath *string `json:"schedulerNamePath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	LabelsPath *string `json:"labelsPath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	AnnotationsPath *string `json:"annotationsPath,omitempty"`
	// ResourcesPath yields a ResourceRequirements that applies to the main
	// container.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ResourcesPath *string `json:"resourcesPath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ResourceClaimsPath *string `json:"resourceClaimsPath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	PodAffinityPath *string `json:"podAffinityPath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	NodeAffinityPath *string `json:"nodeAffinityPath,omitempty"`
	// ContainersPath yields the list of containers.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ContainersPath *string `json:"containersPath,omitempty"`
	// ContainerPath yields the single (main) container.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ContainerPath *string `json:"containerPath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	PriorityClassNamePath *string `json:"priorityClassNamePath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ImagePath *string `json:"imagePath,omitempty"`
}

// ScaleDefinition says where a component's replica counts are. A count is
// the component's total in the whole workload, not multiplied by its
// parent's (Workload Map's rule; see docs/workload-map-compatibility.md).
type ScaleDefinition struct {
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ReplicasPath *string `json:"replicasPath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	MinReplicasPath *string `json:"minReplicasPath,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	MaxReplicasPath *string `json:"maxReplicasPath,omitempty"`
}

// SuspendDefinition lists the assignments that suspend and resume a
// component.
type SuspendDefinition struct {
	// +kubebuilder:validation:MaxItems=64
	SuspendActions []SuspendAction `json:"suspendActions"`
	// +kubebuilder:validation:MaxItems=64
	ResumeActions []SuspendAction `json:"resumeActions"`
}

// SuspendAction assigns Value at Path.
type SuspendAction struct {
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Value apiextensionsv1.JSON `json:"value"`
}

// PodSelector tells which pods belong to a component. Its paths run on the
// pod, not on the root object.
type PodSelector struct {
	// +optional
	ComponentTypeSelector *ComponentTypeSelector `json:"componentTypeSelector,omitempty"`
	// +optional
	ComponentInstanceSelector *ComponentInstanceSelector `json:"componentInstanceSelector,omitempty"`
	// +optional
	ReplicaSelector *ReplicaSelector `json:"replicaSelector,omitempty"`
}

// ComponentTypeSelector matches a pod when keyPath yields value (or, without
// value, anything non-null), and every entry of matchLabels is a label of the
// pod.
type ComponentTypeSelector struct {
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	KeyPath string `json:"keyPath,omitempty"`
	// +optional
	Value *string `json:"value,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// ComponentInstanceSelector yields, on the pod, the id of the component
// instance it belongs to (compared with instanceIdPath's values).
type ComponentInstanceSelector struct {
	// +kubebuilder:validation:MaxLength=4096
	IDPath string `json:"idPath"`
}

// ReplicaSelector yields, on the pod, which replica or group it belongs to.
type ReplicaSelector struct {
	// +kubebuilder:validation:MaxLength=4096
	KeyPath string `json:"keyPath"`
}

// ResourceStatus is the shared status vocabulary.
type ResourceStatus string

// The shared status vocabulary.
const (
	StatusInitializing ResourceStatus = "Initializing"
	StatusRunning      ResourceStatus = "Running"
	StatusCompleted    ResourceStatus = "Completed"
	StatusFailed       ResourceStatus = "Failed"
	StatusDegraded     ResourceStatus = "Degraded"
	StatusSuspended    ResourceStatus = "Suspended"
	StatusSuspending   ResourceStatus = "Suspending"
	StatusResuming     ResourceStatus = "Resuming"
	StatusUndefined    ResourceStatus = "Undefined"
)

// StatusDefinition maps the root object's phase and conditions to the shared
// vocabulary.
type StatusDefinition struct {
	// +optional
	PhaseDefinition *PhaseDefinition `json:"phaseDefinition,omitempty"`
	// +optional
	ConditionsDefinition *ConditionsDefinition `json:"conditionsDefinition,omitempty"`
	StatusMappings       StatusMappings        `json:"statusMappings"`
}

// PhaseDefinition gives the path of a phase string.
type PhaseDefinition struct {
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`
}

// ConditionsDefinition gives the path of a conditions list and its field
// names (defaults: type, status, message, reason).
type ConditionsDefinition struct {
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`
	// +optional
	TypeFieldName string `json:"typeFieldName,omitempty"`
	// +optional
	StatusFieldName string `json:"statusFieldName,omitempty"`
	// +optional
	MessageFieldName *string `json:"messageFieldName,omitempty"`
	// +optional
	ReasonFieldName *string `json:"reasonFieldName,omitempty"`
}

// StatusMappings lists, per status, matchers that are ORed.
type StatusMappings struct {
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Initializing []StatusMatcher `json:"initializing,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Running []StatusMatcher `json:"running,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Completed []StatusMatcher `json:"completed,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Failed []StatusMatcher `json:"failed,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Degraded []StatusMatcher `json:"degraded,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Suspended []StatusMatcher `json:"suspended,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Suspending []StatusMatcher `json:"suspending,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Resuming []StatusMatcher `json:"resuming,omitempty"`
}

// StatusMatcher matches when every part it sets holds.
type StatusMatcher struct {
	// +optional
	ByPhase string `json:"byPhase,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	ByConditions []ExpectedCondition `json:"byConditions,omitempty"`
	// +optional
	ByExpression *ExpressionMatcher `json:"byExpression,omitempty"`
}

// ExpressionMatcher holds when expression, run on the root object, yields
// expectedResult (compared as a string).
type ExpressionMatcher struct {
	// +kubebuilder:validation:MaxLength=4096
	Expression     string `json:"expression"`
	ExpectedResult string `json:"expectedResult"`
}

// ExpectedCondition holds when a condition of that type exists with the
// given status and reason (each when set).
type ExpectedCondition struct {
	Type string `json:"type"`
	// +optional
	Status *string `json:"status,omitempty"`
	// +optional
	Reason *string `json:"reason,omitempty"`
}

// OptimizationInstructions holds the optimizations a workload type asks for.
type OptimizationInstructions struct {
	// +optional
	GangScheduling *GangSchedulingInstruction `json:"gangScheduling,omitempty"`
}

// GangSchedulingInstruction says how pods form gangs, in either of the two
// forms of the format: podGroups (older, with grouping keys) or podGroup
// (newer, one group with sub-groups and topology).
type GangSchedulingInstruction struct {
	// +optional
	// +kubebuilder:validation:MaxItems=64
	PodGroups []PodGroupDefinition `json:"podGroups,omitempty"`
	// +optional
	PodGroup *PodGroupTree `json:"podGroup,omitempty"`
}

// PodGroupDefinition is one gang definition of the older form.
type PodGroupDefinition struct {
	Name string `json:"name"`
	// +kubebuilder:validation:MaxItems=64
	Members []PodGroupMemberDefinition `json:"members"`
}

// PodGroupMemberDefinition puts the pods of one component into the group.
type PodGroupMemberDefinition struct {
	ComponentName string `json:"componentName"`
	// GroupByKeyPaths run on the pod; each must yield one non-empty value.
	// Together they name the gang instance.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	GroupByKeyPaths []string `json:"groupByKeyPaths,omitempty"`
	// Filters run on the pod; all must be true for the pod to be a member.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Filters []string `json:"filters,omitempty"`
}

// PodGroupTree is the newer form: one gang for the workload with sub-groups
// per component and topology constraints.
type PodGroupTree struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Topology *TopologyConstraint `json:"topology,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	SubGroups []SubGroupDefinition `json:"subGroups,omitempty"`
}

// SubGroupDefinition is one component's part of a PodGroupTree.
type SubGroupDefinition struct {
	ComponentName string `json:"componentName"`
	// +optional
	Topology *TopologyConstraint `json:"topology,omitempty"`
}

// TopologyConstraint asks for the members to share a domain of a node label.
type TopologyConstraint struct {
	// +optional
	TopologyName string `json:"topologyName,omitempty"`
	// RequiredTopologyLevel is a node label key; all members in one domain.
	// +optional
	RequiredTopologyLevel string `json:"requiredTopologyLevel,omitempty"`
	// PreferredTopologyLevel is a node label key; one domain if possible.
	// +optional
	PreferredTopologyLevel string `json:"preferredTopologyLevel,omitempty"`
}
