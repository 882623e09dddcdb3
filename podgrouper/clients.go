package podgrouper

import (
	"fmt"

	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
)

// NewClients builds every client the controller needs from one config. The
// RESTMapper reads discovery lazily and is reset when an owner kind is
// unknown, so CRDs installed after start are found.
func NewClients(cfg *rest.Config) (Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	// Custom resources (PodGroups, workloads, Kartas) speak JSON only; a
	// protobuf content type from the caller's config would fail on them.
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType = "application/json"
	pg, err := pgclientset.NewForConfig(jsonCfg)
	if err != nil {
		return Clients{}, fmt.Errorf("PodGroup client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("metadata client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(jsonCfg)
	if err != nil {
		return Clients{}, fmt.Errorf("dynamic client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return Clients{Kube: kube, PodGroups: pg, Metadata: md, Dynamic: dyn, Mapper: mapper}, nil
}
