package cli

import "fmt"

// The JSON (and YAML) output of the commands. These structs ARE the stable
// output contract documented in README.md: add fields freely, never rename
// or remove one, and keep the units in the names.

// Description is the output of "muster describe" for one workload.
type Description struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
	// Definition names the definition used; DefinitionOrigin is embedded,
	// cluster or file; DefinitionSource is where it came from.
	Definition       string `json:"definition"`
	DefinitionOrigin string `json:"definitionOrigin"`
	DefinitionSource string `json:"definitionSource,omitempty"`
	// Created is the workload's creation time (RFC 3339); empty offline.
	Created string `json:"created,omitempty"`
	// Age is Created rendered like kubectl ("5m"); empty offline.
	Age string `json:"age,omitempty"`
	// Live is true when the view comes from a cluster, false for -f.
	Live bool `json:"live"`
	// Phases are the statuses the definition matched (Running, Degraded,
	// …, or Undefined); Phase is the raw phase string it read, if any.
	Phases     []string        `json:"phases"`
	Phase      string          `json:"phase,omitempty"`
	Conditions []ConditionView `json:"conditions,omitempty"`
	Totals     Totals          `json:"totals"`
	Components []ComponentView `json:"components"`
	Gangs      []GangView      `json:"gangs"`
	Plans      []GangPlanView  `json:"plans"`
	Unmatched  []UnmatchedPod  `json:"unmatchedPods,omitempty"`
	// Queue is what the cluster's admission system (Kueue) says of the
	// workload; absent without one.
	Queue    *QueueView `json:"queue,omitempty"`
	Warnings []string   `json:"warnings,omitempty"`
}

// ConditionView is one condition of the workload as the definition reads it.
type ConditionView struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Totals sums the workload as the spec asks for it (desired pods and their
// requests) and as the pods found are (observed, ready).
type Totals struct {
	// Pods is the number of pods the spec asks for; MinPods counts
	// minReplicas where set.
	Pods    int64 `json:"pods"`
	MinPods int64 `json:"minPods"`
	// ObservedPods were found (live, or given with --pods); ReadyPods of
	// them are Ready; BoundPods have a node.
	ObservedPods int64 `json:"observedPods"`
	ReadyPods    int64 `json:"readyPods"`
	BoundPods    int64 `json:"boundPods"`
	// GPUs, CPUMillis and MemoryBytes are the requests of the desired pods.
	GPUs        int64 `json:"gpus"`
	CPUMillis   int64 `json:"cpuMillis"`
	MemoryBytes int64 `json:"memoryBytes"`
}

// ComponentView is one component (role) of the workload.
type ComponentView struct {
	Name   string `json:"name"`
	Parent string `json:"parent,omitempty"`
	// Kind is group/version/kind of the object the component stands for,
	// empty for a logical grouping.
	Kind    string `json:"kind,omitempty"`
	HasPods bool   `json:"hasPods"`
	// Replicas is how many objects (pods, for a pod-bearing component)
	// the component stands for in the whole workload.
	Replicas int64 `json:"replicas"`
	// GPUs, CPUMillis and MemoryBytes are the requests of all its desired
	// pods; zero for components without pods.
	GPUs        int64          `json:"gpus"`
	CPUMillis   int64          `json:"cpuMillis"`
	MemoryBytes int64          `json:"memoryBytes"`
	Pods        PodCounts      `json:"pods"`
	Instances   []InstanceView `json:"instances"`
}

// PodCounts counts pods: desired by the spec, found, ready, bound to a node.
type PodCounts struct {
	Desired  int64 `json:"desired"`
	Min      int64 `json:"min"`
	Observed int64 `json:"observed"`
	Ready    int64 `json:"ready"`
	Bound    int64 `json:"bound"`
}

// InstanceView is one instance of a component (one replicated job, one
// worker group); ID is empty for a single-instance component.
type InstanceView struct {
	ID string `json:"id"`
	// Replicas is this instance's own count in the whole workload, as the
	// definition reads it (a total, not multiplied by the parent's).
	Replicas    int32  `json:"replicas"`
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
	// Requests of one pod of this instance.
	GPUsPerPod        int64     `json:"gpusPerPod"`
	CPUMillisPerPod   int64     `json:"cpuMillisPerPod"`
	MemoryBytesPerPod int64     `json:"memoryBytesPerPod"`
	GPUs              int64     `json:"gpus"`
	Pods              PodCounts `json:"pods"`
	// Items are the pods found, unhealthy first, cut to --pod-limit per
	// component; Omitted counts the ones cut.
	Items   []PodView `json:"items"`
	Omitted int       `json:"omitted,omitempty"`
}

// PodView is one pod of the workload.
type PodView struct {
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Ready   bool   `json:"ready"`
	Node    string `json:"node,omitempty"`
	GPUs    int64  `json:"gpus"`
	Replica string `json:"replica,omitempty"`
	// Gang names the gang (PodGroup) the pod belongs to, "" for none.
	Gang string `json:"gang,omitempty"`
	// Reason says why a pod is not ready: a container's waiting reason,
	// or the scheduler's message.
	Reason   string `json:"reason,omitempty"`
	Restarts int32  `json:"restarts,omitempty"`
}

// UnmatchedPod is a pod of the workload that no component claims: a sign
// that the definition's podSelector misses it.
type UnmatchedPod struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// GangView is one gang instance: a PodGroup live, or the group its pods
// form under the definition offline.
type GangView struct {
	// Name is the PodGroup's name: live, the one the pods are labelled
	// with; else (offline) the name the pod-grouper would give it.
	Name       string   `json:"name"`
	Definition string   `json:"definition,omitempty"`
	Keys       []string `json:"keys,omitempty"`
	Members    []string `json:"members,omitempty"`
	MinMember  int32    `json:"minMember"`
	// MinResources maps resource name to quantity ("nvidia.com/gpu": "12").
	MinResources map[string]string `json:"minResources,omitempty"`
	// Pods found in the gang and how many of them have a node.
	Pods  int `json:"pods"`
	Bound int `json:"bound"`
	// Phase is the PodGroup's phase live; offline Bound or Pending.
	Phase string `json:"phase"`
	// Reason is, for a gang not yet bound, what the scheduler says.
	Reason string `json:"reason,omitempty"`
	// PodGroupFound says whether the PodGroup exists in the cluster.
	PodGroupFound bool `json:"podGroupFound"`
	// Priority is the gang's priority the pod-grouper recorded on the
	// PodGroup (the highest of its members'), PriorityClass the class it
	// came from; absent when none is recorded (offline, or no member has
	// a priority).
	Priority      *int32 `json:"priority,omitempty"`
	PriorityClass string `json:"priorityClass,omitempty"`
	// Elastic is set for a gang with more members than its minMember.
	Elastic *ElasticView `json:"elastic,omitempty"`
	// Native says the gang is a native PodGroup (scheduling.k8s.io/v1beta1)
	// its pods name in spec.schedulingGroup, placed by the scheduler's
	// in-tree GangScheduling plugin: Name is that PodGroup's, MinMember its
	// minCount, Bound its members scheduled, Phase what its
	// PodGroupInitiallyScheduled condition says. NativePodGroup has the rest.
	Native         bool                `json:"native,omitempty"`
	NativePodGroup *NativePodGroupView `json:"nativePodGroup,omitempty"`
}

// NativePodGroupView is what describe reads of a native gang, counted from
// its pods (what the proposed PodGroupSatisfied condition of KEP-6413 is
// to say) and from the scheduler's condition and events.
type NativePodGroupView struct {
	// APIVersion is scheduling.k8s.io/v1beta1.
	APIVersion string `json:"apiVersion"`
	// Policy is "gang" (minCount members placed all or nothing) or "basic"
	// (no gang: pods placed one by one).
	Policy   string `json:"policy"`
	MinCount int32  `json:"minCount"`
	// Members are the pods naming the PodGroup that are not being deleted
	// and have not failed; Scheduled those with a node, Ready those of
	// them ready (or completed).
	Members   int `json:"members"`
	Scheduled int `json:"scheduled"`
	Ready     int `json:"ready"`
	// Summary reads "2 of 3 members scheduled, 1 ready".
	Summary string `json:"summary"`
	// InitiallyScheduled is the PodGroup's PodGroupInitiallyScheduled
	// condition (True once the gang was placed, and then for good; False
	// with reason Unschedulable or SchedulerError and the scheduler's
	// message); absent while the scheduler has not tried the gang.
	InitiallyScheduled *ConditionView `json:"initiallyScheduled,omitempty"`
	// LastFailedScheduling is the newest FailedScheduling event of a
	// member not scheduled.
	LastFailedScheduling *SchedulingEventView `json:"lastFailedScheduling,omitempty"`
}

// SchedulingEventView is one FailedScheduling event of a pod.
type SchedulingEventView struct {
	Pod     string `json:"pod"`
	Message string `json:"message"`
	// Time is when it was last seen (RFC 3339), empty when unknown.
	Time string `json:"time,omitempty"`
}

// ElasticView splits an elastic gang: the quorum (minMember members) is
// placed all or nothing, the extras above it one by one as room exists,
// and under pressure the extras are preempted first.
type ElasticView struct {
	Quorum      int32 `json:"quorum"`
	QuorumBound int32 `json:"quorumBound"`
	Extras      int32 `json:"extras"`
	ExtrasBound int32 `json:"extrasBound"`
}

// String is the scheduler's GangElastic wording without the gang's name:
// "quorum 2/2 bound, extras 1/3 bound".
func (e *ElasticView) String() string {
	return fmt.Sprintf("quorum %d/%d bound, extras %d/%d bound", e.QuorumBound, e.Quorum, e.ExtrasBound, e.Extras)
}

// GangPlanView is what a gang definition yields on the spec alone: how many
// gang instances, how big each one is.
type GangPlanView struct {
	Definition string `json:"definition"`
	// PodGroup is the name the pod-grouper gives the gang's PodGroup, when
	// the spec alone tells it: a whole-workload gang. Grouped gangs get
	// one PodGroup per key, named after pod values, so it is empty.
	PodGroup          string            `json:"podGroup,omitempty"`
	Members           []string          `json:"members"`
	Instances         int               `json:"instances"`
	MinMember         int32             `json:"minMember"`
	MinResources      map[string]string `json:"minResources,omitempty"`
	TopologyRequired  string            `json:"topologyRequired,omitempty"`
	TopologyPreferred string            `json:"topologyPreferred,omitempty"`
}

// WorkloadRow is one line of "muster get".
type WorkloadRow struct {
	Namespace  string   `json:"namespace,omitempty"`
	Kind       string   `json:"kind"`
	APIVersion string   `json:"apiVersion"`
	Name       string   `json:"name"`
	Definition string   `json:"definition"`
	Phases     []string `json:"phases"`
	Pods       int64    `json:"pods"`
	ReadyPods  int64    `json:"readyPods"`
	GPUs       int64    `json:"gpus"`
	// Gangs is the number of gang instances the definition plans;
	// GangsBound how many of them have min-member pods on nodes.
	Gangs      int `json:"gangs"`
	GangsBound int `json:"gangsBound"`
	// GangsUnschedulable counts gangs not bound whose pending members the
	// scheduler marked Unschedulable: they are stuck, not starting.
	GangsUnschedulable int `json:"gangsUnschedulable,omitempty"`
	// NativeGangs counts the gangs that are native PodGroups
	// (scheduling.k8s.io/v1beta1), included in Gangs.
	NativeGangs int `json:"nativeGangs,omitempty"`
	// Priority is the highest priority the pod-grouper recorded on the
	// workload's PodGroups (a native PodGroup's spec.priority); absent
	// when none is recorded.
	Priority *int32   `json:"priority,omitempty"`
	Created  string   `json:"created,omitempty"`
	Age      string   `json:"age,omitempty"`
	Nodes    []string `json:"nodes,omitempty"`
	Error    string   `json:"error,omitempty"`
	// Queue is what Kueue says of the workload (its free quota is not
	// read by get); absent without Kueue.
	Queue *QueueView `json:"queue,omitempty"`
}

// WorkloadList is the JSON of "muster get".
type WorkloadList struct {
	Items []WorkloadRow `json:"items"`
}

// DefinitionRow is one line of "muster definitions".
type DefinitionRow struct {
	Name string `json:"name"`
	// Origin is embedded or cluster; Source the file or Karta.
	Origin string `json:"origin"`
	Source string `json:"source"`
	// RootKind is group/version/kind of the root component.
	RootKind string `json:"rootKind"`
	// Gang says how pods form gangs: none, workload, or per <keys>.
	Gang string `json:"gang"`
	// Active is false when another definition for the same kind wins.
	Active bool   `json:"active"`
	Error  string `json:"error,omitempty"`
	// Generation is the Karta's metadata.generation (cluster definitions).
	Generation int64 `json:"generation,omitempty"`
	// LastGoodGeneration, on a broken cluster definition, is its earlier
	// generation still in use for its kind.
	LastGoodGeneration int64 `json:"lastGoodGeneration,omitempty"`
	// ShadowedBy names the cluster definition that serves the kind instead.
	ShadowedBy string `json:"shadowedBy,omitempty"`
}

// DefinitionList is the JSON of "muster definitions".
type DefinitionList struct {
	Items []DefinitionRow `json:"items"`
}

// ValidationResult is the JSON of "muster validate".
type ValidationResult struct {
	File        string             `json:"file"`
	Valid       bool               `json:"valid"`
	Definitions []DefinitionResult `json:"definitions"`
}

// DefinitionResult is the validation of one document.
type DefinitionResult struct {
	Name     string   `json:"name"`
	Valid    bool     `json:"valid"`
	Problems []string `json:"problems,omitempty"`
	// SchemaChecked says whether paths were checked against a CRD schema.
	SchemaChecked bool `json:"schemaChecked"`
	// Deprecated is set when the document is written in a deprecated form
	// (a ResourceInterface): read as a Karta, with this notice.
	Deprecated string `json:"deprecated,omitempty"`
}

// VersionInfo is the JSON of "muster version".
type VersionInfo struct {
	Client string `json:"clientVersion"`
	Server string `json:"serverVersion,omitempty"`
	// ServerError says why the server version is missing.
	ServerError string `json:"serverError,omitempty"`
}
