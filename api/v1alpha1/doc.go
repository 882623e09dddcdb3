// Package v1alpha1 is the workload definition API: the Karta kind of the
// run.ai/v1alpha1 group, the format of NVIDIA Workload Map. It is part of
// muster's wire contract and imports nothing of muster; the engine that
// decodes, validates and evaluates these types is package definition.
//
// The markers below drive CRD generation (make manifests): the Karta types
// belong to the API group run.ai, version v1alpha1, and no deepcopy code is
// generated for them (definitions are decoded, never kept in a typed cache).
//
// +groupName=run.ai
// +versionName=v1alpha1
// +kubebuilder:object:generate=false
package v1alpha1
