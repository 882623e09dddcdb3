package podgrouper

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// ServesNative asks discovery whether the cluster serves native PodGroups
// (scheduling.k8s.io/v1beta1 podgroups: the API server's GenericWorkload
// gate and runtime-config). A group version that is not served is false
// with no error; any other discovery failure is an error.
func ServesNative(ctx context.Context, d discovery.DiscoveryInterface) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	list, err := d.ServerResourcesForGroupVersion(NativeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovery of %s: %w", NativeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "podgroups" {
			return true, nil
		}
	}
	return false, nil
}
