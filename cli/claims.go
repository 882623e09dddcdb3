package cli

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-io/muster/definition"
)

// listClaimTemplates lists the ResourceClaimTemplates of ns (all
// namespaces for ""): the GPUs pods ask for through DRA are in them. A
// cluster that does not serve DRA has none; one the user may not read
// them in gives a warning, and DRA GPUs count as none.
func listClaimTemplates(ctx context.Context, c *Cluster, ns string) ([]resourcev1.ResourceClaimTemplate, error) {
	list, err := c.Kube.ResourceV1().ResourceClaimTemplates(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("GPUs asked for through ResourceClaimTemplates are not counted: %w", err)
	}
	return list.Items, nil
}

// claimTemplatesByName looks the templates of one namespace up by name.
func claimTemplatesByName(items []resourcev1.ResourceClaimTemplate) definition.ClaimTemplates {
	if len(items) == 0 {
		return nil
	}
	byName := make(map[string]*resourcev1.ResourceClaimTemplate, len(items))
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	return func(name string) *resourcev1.ResourceClaimTemplate { return byName[name] }
}
