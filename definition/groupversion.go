// The markers below drive CRD generation (make manifests): the Karta types
// belong to the API group run.ai, version v1alpha1, and no deepcopy code is
// generated for them (definitions are decoded, never kept in a typed cache).

// +groupName=run.ai
// +versionName=v1alpha1
// +kubebuilder:object:generate=false
package definition
