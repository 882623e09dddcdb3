package localcluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/internal/yamldoc"
)

// InstallCRD creates (or updates) crd and waits until it is Established and
// discoverable, then resets the client REST mapper.
//
// Install CRDs before StartControllers when you can: the apiserver delays the
// first create of a custom resource by 2s when it comes less than 2s after
// its CRD became Established, and the garbage collector only learns about
// new kinds at its next discovery sync (every second here).
func (cp *ControlPlane) InstallCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := cp.APIExtensions.ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, getErr := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, getErr)
		}
		upd := crd.DeepCopy()
		upd.ResourceVersion = cur.ResourceVersion
		_, err = crds.Update(ctx, upd, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	err = WaitFor(ctx, 30*time.Second, "CRD "+crd.Name+" Established", func(ctx context.Context) (bool, string, error) {
		cur, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == apiextensionsv1.Established {
				return c.Status == apiextensionsv1.ConditionTrue, fmt.Sprintf("Established=%s %s", c.Status, c.Message), nil
			}
		}
		return false, "no Established condition yet", nil
	})
	if err != nil {
		return err
	}
	cp.mapper.Reset()
	return nil
}

// InstallCRDFile installs every CustomResourceDefinition in a YAML (or JSON)
// file; documents are separated by "---". Other kinds in the file are an
// error, so a wrong path fails loudly.
func (cp *ControlPlane) InstallCRDFile(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read CRD file: %w", err)
	}
	crds, err := DecodeCRDs(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(crds) == 0 {
		return fmt.Errorf("%s: no CustomResourceDefinition in file", path)
	}
	for _, crd := range crds {
		if err := cp.InstallCRD(ctx, crd); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// DecodeCRDs decodes a multi-document YAML stream of CRDs (v1 only).
func DecodeCRDs(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := SplitYAML(data)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for i, doc := range docs {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(doc, &crd); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if crd.Kind != "CustomResourceDefinition" || crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("document %d: want apiextensions.k8s.io/v1 CustomResourceDefinition, got %s %s", i+1, crd.APIVersion, crd.Kind)
		}
		out = append(out, &crd)
	}
	return out, nil
}

// SplitYAML splits a multi-document YAML stream into JSON documents, dropping
// empty ones (comments only, a leading "---").
func SplitYAML(data []byte) ([][]byte, error) {
	docs, err := yamldoc.Split(data, false)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i] = d.JSON
	}
	return out, nil
}

// PermissiveCRD builds a CRD for tests that accepts any spec and status
// (x-kubernetes-preserve-unknown-fields) and serves the status subresource.
// scope is apiextensionsv1.NamespaceScoped or ClusterScoped. Use WithScale to
// add the scale subresource.
func PermissiveCRD(group, version, kind, plural string, scope apiextensionsv1.ResourceScope, shortNames ...string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural:     plural,
				Singular:   strings.ToLower(kind),
				Kind:       kind,
				ListKind:   kind + "List",
				ShortNames: shortNames,
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:    version,
				Served:  true,
				Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type:                   "object",
						XPreserveUnknownFields: ptr.To(true),
					},
				},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
				},
			}},
		},
	}
}

// WithScale adds the scale subresource to every version of crd, with the
// given JSON paths (for example ".spec.replicas", ".status.replicas",
// ".status.selector"; selectorPath may be empty). It returns crd.
func WithScale(crd *apiextensionsv1.CustomResourceDefinition, specReplicasPath, statusReplicasPath, selectorPath string) *apiextensionsv1.CustomResourceDefinition {
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Subresources == nil {
			v.Subresources = &apiextensionsv1.CustomResourceSubresources{}
		}
		s := &apiextensionsv1.CustomResourceSubresourceScale{
			SpecReplicasPath:   specReplicasPath,
			StatusReplicasPath: statusReplicasPath,
		}
		if selectorPath != "" {
			s.LabelSelectorPath = ptr.To(selectorPath)
		}
		v.Subresources.Scale = s
	}
	return crd
}
